/*
 * coursehub's exam clock: a JupyterLab 4 plugin for a student's exam server.
 *
 * It asks the server extension (coursehub.examroom.clock) for the sitting,
 * GET <base_url>/coursehub/exam/status, every POLL_MS; a server without that
 * route (404) is no exam server and the plugin adds nothing. Between two
 * answers the clock ticks once a second from the seconds left the server
 * gave, measured against performance.now(), so a wrong clock on the student's
 * computer changes nothing. warn_before_s before the end (the exam's
 * warn_before_min; 0: never) it raises a JupyterLab notification
 * (Notification.warning, @jupyterlab/apputils); at the end the clock says
 * that time is up and whether the work was submitted (the receipt's time and
 * the first characters of its SHA-256).
 *
 * The clock's "Full screen" button asks the browser for full screen
 * (Element.requestFullscreen, MDN "Fullscreen API"). When the exam's
 * fullscreen is "required", an overlay covers the workspace while the exam
 * runs and the page is not in full screen (document.fullscreenElement null):
 * a browser enters full screen only from a user gesture (MDN
 * "Element: requestFullscreen() method", transient activation), so the
 * overlay's one button is that gesture; the workspace under it is inert
 * (HTMLElement.inert), so neither the mouse nor the keyboard reaches it.
 * Leaving full screen brings the overlay back. Leaving it
 * (fullscreenchange), hiding the tab (visibilitychange, MDN "Page Visibility
 * API") and the window losing the focus (blur) are posted, while the exam
 * runs, to POST <base_url>/coursehub/exam/events {"kind": ...}; the server
 * extension forwards them to the course app, which takes the student from
 * the server's token, never from the browser.
 */
import { Notification } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

const POLL_MS = 15000;
const TICK_MS = 1000;
const STATUS_PATH = 'coursehub/exam/status';
const EVENTS_PATH = 'coursehub/exam/events';
const OVERLAY_ID = 'coursehub-exam-fullscreen-overlay';

/** "1:02:03" or "12:03" for a number of seconds (>= 0). */
export function formatLeft(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = n => String(n).padStart(2, '0');
  return h > 0 ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

/** The clock's text at `left` seconds before the end, for the sitting `status`. */
export function describe(status, left) {
  if (left > 0) {
    return `${status.assignment}: ${formatLeft(left)} left`;
  }
  const receipt = status.receipt;
  if (receipt && receipt.final) {
    const at = new Date(receipt.submitted_at).toLocaleTimeString();
    return `Time is up: your work was submitted at ${at} (SHA-256 ${receipt.sha256.slice(0, 12)})`;
  }
  return 'Time is up: your work is being submitted';
}

/** Whether the exam covers the workspace now: full screen required, the exam running,
 * the page not in full screen. */
export function mustCover(status, left, fullscreenElement) {
  return status !== null && status.fullscreen === 'required' && left > 0 && !fullscreenElement;
}

/** The overlay of an exam that must be taken in full screen, with its one button. */
function makeOverlay(onEnter) {
  const overlay = document.createElement('div');
  overlay.id = OVERLAY_ID;
  overlay.className = 'coursehub-ExamOverlay';
  overlay.setAttribute('role', 'dialog');
  overlay.setAttribute('aria-modal', 'true');
  const box = document.createElement('div');
  box.className = 'coursehub-ExamOverlay-box';
  const title = document.createElement('p');
  title.className = 'coursehub-ExamOverlay-title';
  title.textContent = 'This exam must be taken in full screen.';
  const note = document.createElement('p');
  note.className = 'coursehub-ExamOverlay-note';
  note.textContent = document.fullscreenEnabled
    ? 'Your time runs meanwhile. Leaving full screen brings this back and is recorded.'
    : 'This browser does not allow full screen here: ask the proctor.';
  const button = document.createElement('button');
  button.className = 'coursehub-ExamOverlay-enter jp-Button';
  button.textContent = 'Enter full screen';
  button.disabled = !document.fullscreenEnabled;
  button.addEventListener('click', onEnter);
  box.append(title, note, button);
  overlay.append(box);
  return overlay;
}

class ExamClock {
  constructor(app, settings) {
    this.app = app;
    this.settings = settings;
    this.status = null;
    this.endsAtMs = null; // performance.now() at the end
    this.warnedFor = null;
    this.endedFor = null;
    this.widget = new Widget();
    this.widget.id = 'coursehub-exam-clock';
    this.widget.addClass('coursehub-ExamClock');
    this.text = document.createElement('span');
    this.text.className = 'coursehub-ExamClock-text';
    this.button = document.createElement('button');
    this.button.className = 'coursehub-ExamClock-fullscreen jp-Button';
    this.button.textContent = 'Full screen';
    this.button.addEventListener('click', () => this.enterFullscreen());
    this.widget.node.append(this.text, this.button);
    app.shell.add(this.widget, 'top', { rank: 1000 });
    this.wasFullscreen = false;
    this.overlay = null;
    document.addEventListener('fullscreenchange', () => this.onFullscreenChange());
    document.addEventListener('visibilitychange', () =>
      this.post(document.hidden ? 'tab-hidden' : 'tab-visible', document.visibilityState)
    );
    window.addEventListener('blur', () => this.post('window-blur', 'the window lost the focus'));
  }

  secondsLeft() {
    return this.endsAtMs === null ? 0 : (this.endsAtMs - performance.now()) / 1000;
  }

  update(status) {
    this.status = status;
    this.endsAtMs = performance.now() + 1000 * (status.seconds_left || 0);
    this.tick();
  }

  tick() {
    if (this.status === null) {
      return;
    }
    const left = this.secondsLeft();
    const end = this.status.ends_at;
    this.text.textContent = describe(this.status, left);
    this.widget.toggleClass('coursehub-mod-warning', left > 0 && left <= this.status.warn_before_s);
    this.widget.toggleClass('coursehub-mod-ended', left <= 0);
    this.button.style.display = left <= 0 ? 'none' : '';
    this.cover(mustCover(this.status, left, document.fullscreenElement));
    if (left > 0 && left <= this.status.warn_before_s && this.warnedFor !== end) {
      this.warnedFor = end;
      Notification.warning(
        `${formatLeft(left)} left in ${this.status.assignment}: save your work ` +
          '(it is submitted at the end).',
        { autoClose: false }
      );
    }
    if (left <= 0 && this.endedFor !== end) {
      this.endedFor = end;
      Notification.info(
        `Time is up for ${this.status.assignment}: your saved work is submitted.`,
        { autoClose: false }
      );
    }
  }

  running() {
    return this.status !== null && this.secondsLeft() > 0;
  }

  /** Show or hide the full-screen overlay; the workspace is inert while it shows. */
  cover(shown) {
    if (shown && this.overlay === null) {
      this.overlay = makeOverlay(() => this.enterFullscreen());
      document.body.append(this.overlay);
      this.app.shell.node.inert = true;
      this.overlay.querySelector('button').focus();
    } else if (!shown && this.overlay !== null) {
      this.overlay.remove();
      this.overlay = null;
      this.app.shell.node.inert = false;
    }
  }

  enterFullscreen() {
    const root = document.documentElement;
    if (root.requestFullscreen && !document.fullscreenElement) {
      root.requestFullscreen().catch(error => console.warn('coursehub: full screen refused', error));
    }
  }

  onFullscreenChange() {
    this.cover(mustCover(this.status, this.secondsLeft(), document.fullscreenElement));
    if (document.fullscreenElement) {
      this.wasFullscreen = true;
      this.post('fullscreen-enter', 'the student entered full screen');
    } else if (this.wasFullscreen) {
      this.wasFullscreen = false;
      this.post('fullscreen-exit', 'the student left full screen');
    }
  }

  post(kind, detail) {
    if (!this.running()) {
      return;
    }
    const url = URLExt.join(this.settings.baseUrl, EVENTS_PATH);
    const init = { method: 'POST', body: JSON.stringify({ kind, detail: String(detail) }) };
    ServerConnection.makeRequest(url, init, this.settings).catch(error =>
      console.warn('coursehub: exam event not sent', error)
    );
  }
}

async function fetchStatus(settings) {
  const url = URLExt.join(settings.baseUrl, STATUS_PATH);
  const response = await ServerConnection.makeRequest(url, {}, settings);
  if (response.status === 404) {
    return null; // not an exam server
  }
  if (!response.ok) {
    throw new Error(`${url}: HTTP ${response.status}`);
  }
  return response.json();
}

async function start(app) {
  const settings = ServerConnection.makeSettings();
  let status;
  try {
    status = await fetchStatus(settings);
  } catch (error) {
    console.warn('coursehub: exam clock not started', error);
    status = undefined;
  }
  if (status === null) {
    return; // not an exam server: nothing shown
  }
  const clock = new ExamClock(app, settings);
  if (status) {
    clock.update(status);
  } else {
    clock.text.textContent = 'Exam: asking for the time left...';
  }
  setInterval(() => clock.tick(), TICK_MS);
  setInterval(() => {
    fetchStatus(settings)
      .then(answer => answer && clock.update(answer))
      .catch(error => console.warn('coursehub: exam status not read', error));
  }, POLL_MS);
}

const plugin = {
  id: '@coursehub/exam-clock:plugin',
  description: 'The exam clock of a coursehub exam server.',
  autoStart: true,
  activate: app => {
    void start(app);
  }
};

export default plugin;

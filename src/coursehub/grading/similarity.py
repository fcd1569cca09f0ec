"""Similarity across an assignment's submissions: pairs of students whose code is near-identical.

A student's code is the code cells of their collected submission
(``submitted/<student_id>/<assignment>/*.ipynb``, nbgrader's course layout)
that differ from what the assignment gave them (the released notebooks,
else the source ones): cells handed out unchanged are not theirs. Each
cell is keyed by its nbgrader ``grade_id`` (else ``cell <n>``), so that a
pair's cells can be shown side by side.

The comparison is copydetect's (B. Lingenfelter, https://github.com/blingenf/copydetect):
Pygments tokens with names, whitespace and comments normalised away, k-gram
fingerprints chosen by winnowing (S. Schleimer, D. S. Wilkerson, A. Aiken,
"Winnowing: local algorithms for document fingerprinting", SIGMOD 2003, the
method of MOSS). The given code's fingerprints are boilerplate, discarded.
A pair's similarity is, for each of the two, the share of its fingerprinted
tokens found in the other; a pair is reported when both shares reach the
threshold, so that a short answer inside a long one is not a match.

The notebooks are students' files: they are read as JSON only (never run),
symbolic links are skipped, and the report escapes every character of them.
"""

from __future__ import annotations

import difflib
import html
import io
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: copydetect's defaults (its ``noise_t`` and ``guarantee_t``): k-grams of 25 filtered
#: characters, so that a match of 30 or more is always found (window 30 - 25 + 1).
DEFAULT_K = 25
DEFAULT_WINDOW = 6
#: Reported when both students' shares reach it (0 to 1).
DEFAULT_THRESHOLD = 0.8


@dataclass(frozen=True)
class StudentCode:
    """A student's own code: ``cells`` maps a cell key to its text, in notebook order."""

    student_id: str
    cells: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The cells joined, one blank line apart."""
        return "\n\n".join(self.cells.values())


@dataclass(frozen=True)
class SimilarPair:
    """Two students' code: each one's share found in the other (0 to 1), tokens shared."""

    first: str
    second: str
    shares: tuple[float, float]
    shared_tokens: int

    @property
    def score(self) -> float:
        """The smaller share: both reach it."""
        return min(self.shares)


def _code_cells(notebook: Path) -> Iterable[tuple[str, str]]:
    """Yield ``(key, text)`` of each code cell of ``notebook`` (JSON only; never run)."""
    import nbformat

    node = nbformat.read(str(notebook), as_version=4)
    for index, cell in enumerate(node.cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        key = f"{notebook.stem}:{grade_id or f'cell {index}'}"
        yield key, str(cell.get("source", ""))


def _notebooks(folder: Path) -> list[Path]:
    """The notebooks of ``folder``, sorted, without symbolic links."""
    if not folder.is_dir() or folder.is_symlink():
        return []
    return sorted(p for p in folder.glob("*.ipynb") if p.is_file() and not p.is_symlink())


def given_code(course_dir: Path, assignment: str) -> dict[str, str]:
    """Return the code cells the assignment hands out (``release/``, else ``source/``)."""
    for stage in ("release", "source"):
        notebooks = _notebooks(course_dir / stage / assignment)
        if notebooks:
            return {key: text for nb in notebooks for key, text in _code_cells(nb)}
    return {}


def submitted_code(course_dir: Path, assignment: str, given: dict[str, str]) -> list[StudentCode]:
    """Return each student's own code in ``submitted/*/<assignment>/``, by student id.

    A cell whose text (spaces around it aside) is one of the given cells is
    left out; so is a notebook that cannot be read as one, and a student
    with no code of their own.
    """
    from nbformat.reader import NotJSONError

    given_texts = {text.strip() for text in given.values()}
    codes = []
    submitted = course_dir / "submitted"
    for student_dir in sorted(submitted.iterdir()) if submitted.is_dir() else []:
        cells: dict[str, str] = {}
        for notebook in _notebooks(student_dir / assignment):
            try:
                own = [(k, t) for k, t in _code_cells(notebook) if t.strip() not in given_texts]
            except (NotJSONError, ValueError, OSError):
                continue
            cells.update((key, text) for key, text in own if text.strip())
        if cells:
            codes.append(StudentCode(student_dir.name, cells))
    return codes


def find_similar(
    codes: Sequence[StudentCode],
    given: Iterable[str] = (),
    threshold: float = DEFAULT_THRESHOLD,
    k: int = DEFAULT_K,
    window: int = DEFAULT_WINDOW,
) -> list[SimilarPair]:
    """Return the pairs of ``codes`` whose shares both reach ``threshold``, most similar first.

    ``given``: the code handed out, whose fingerprints are discarded. Cost:
    one fingerprint per student, then n (n - 1) / 2 set comparisons.

    Raises
    ------
    ValueError
        ``threshold`` not in (0, 1].
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold: must be in (0, 1], got {threshold}")
    from copydetect import CodeFingerprint, compare_files

    def fingerprint(text: str, win: int, boilerplate: list[int] | None = None) -> CodeFingerprint:
        return CodeFingerprint(
            "code.py", k, win, boilerplate, language="python", fp=io.StringIO(text)
        )

    # Every k-gram of the given code (a window of 1), as copydetect's own detector does, so
    # that winnowing another text never keeps a k-gram of it.
    boilerplate = [fingerprint(text, 1).hashes for text in given]
    discarded = sorted(set().union(*boilerplate)) if boilerplate else None
    prints = [(c.student_id, fingerprint(c.text, window, discarded)) for c in codes]
    pairs = []
    for (a, fa), (b, fb) in itertools.combinations(prints, 2):
        if not fa.hashes or not fb.hashes:
            continue
        overlap, shares, _ = compare_files(fa, fb)
        pair = SimilarPair(a, b, (float(shares[0]), float(shares[1])), int(overlap))
        if pair.score >= threshold:
            pairs.append(pair)
    return sorted(pairs, key=lambda p: (-p.score, p.first, p.second))


def render_report(
    assignment: str, pairs: Sequence[SimilarPair], codes: Sequence[StudentCode]
) -> str:
    """Return the HTML report: each pair's shares, then their cells side by side.

    Every text from a notebook is escaped (:func:`html.escape`, and
    :class:`difflib.HtmlDiff`'s own escaping).
    """
    by_id = {c.student_id: c for c in codes}
    differ = difflib.HtmlDiff(tabsize=4, wrapcolumn=70)
    parts = [
        "<!doctype html><meta charset='utf-8'>",
        f"<title>Similarity: {html.escape(assignment)}</title>",
        "<style>table.diff{font-family:monospace;border-collapse:collapse;margin-bottom:1em}"
        ".diff_add{background:#cfc}.diff_chg{background:#ffa}.diff_sub{background:#fcc}"
        "td{vertical-align:top}</style>",
        f"<h1>Similarity of {html.escape(assignment)}: {len(pairs)} pair(s)</h1>",
    ]
    for pair in pairs:
        first, second = by_id[pair.first], by_id[pair.second]
        parts.append(
            f"<h2>{html.escape(pair.first)} and {html.escape(pair.second)}: "
            f"{pair.shares[0]:.0%} and {pair.shares[1]:.0%} "
            f"({pair.shared_tokens} tokens shared)</h2>"
        )
        for key in dict.fromkeys([*first.cells, *second.cells]):
            parts.append(f"<h3>{html.escape(key)}</h3>")
            parts.append(
                differ.make_table(
                    first.cells.get(key, "").splitlines(),
                    second.cells.get(key, "").splitlines(),
                    pair.first,
                    pair.second,
                )
            )
    return "\n".join(parts) + "\n"

"""Where the course app's host fetches a course's repository from, and where its credential goes.

Pure parts from tables: the site's allowed hosts (``COURSEHUB_MATERIAL_HOSTS``),
each resolved address, a URL's scheme/host/port, the one check of a
credential kept across a URL change, git's fetch options, a failed fetch's
partial files; and the askpass program, run as git runs it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from coursehub.errors import UsageError
from coursehub.material.credential import (
    check_credential_change,
    plan_credential_env,
    store_credential,
    stored_host,
)
from coursehub.material.credential import (
    parse_credential as parse,
)
from coursehub.material.fetch import is_fetch_garbage, plan_fetch_config
from coursehub.material.hosts import (
    HostPolicy,
    Origin,
    address_allowed,
    check_repo_host,
    parse_host_policy,
    plan_host_refusal,
    refused_message,
    repo_origin,
)
from coursehub.material.layout import MaterialLayout

LOOPBACK = parse_host_policy("127.0.0.1")


@pytest.mark.parametrize(
    ("value", "names", "networks"),
    [
        ("", (), ()),
        ("gitlab.example.org", ("gitlab.example.org",), ()),
        (" *.Example.org, 10.0.0.0/8 ::1 ", ("*.example.org",), ("10.0.0.0/8", "::1/128")),
        ("127.0.0.1", (), ("127.0.0.1/32",)),
        ("*", ("*",), ()),
    ],
)
def test_the_sites_allowed_hosts_are_names_and_networks(value, names, networks):
    policy = parse_host_policy(value)
    assert policy.names == names
    assert tuple(map(str, policy.networks)) == networks


@pytest.mark.parametrize("value", ["http://x", "a b/c", "git@x:y", "10.0.0.0/33"])
def test_a_malformed_allowed_host_is_refused_naming_the_setting(value):
    with pytest.raises(UsageError, match="COURSEHUB_MATERIAL_HOSTS"):
        parse_host_policy(value)


@pytest.mark.parametrize(
    ("address", "default", "loopback_allowed"),
    [
        ("140.82.121.4", True, True),  # a public host
        ("2606:4700:4700::1111", True, True),
        ("127.0.0.1", False, True),
        ("127.0.0.2", False, False),
        ("0.0.0.0", False, False),
        ("::1", False, False),
        ("::ffff:127.0.0.1", False, True),  # IPv4-mapped IPv6
        ("::ffff:10.1.2.3", False, False),
        ("2002:7f00:1::", False, True),  # 6to4 of 127.0.0.1
        ("64:ff9b::a01:203", False, False),  # NAT64 of 10.1.2.3
        ("10.1.2.3", False, False),
        ("172.16.0.1", False, False),
        ("192.168.1.1", False, False),
        ("169.254.169.254", False, False),  # the cloud's metadata service
        ("100.64.0.1", False, False),  # shared address space
        ("fe80::1%eth0", False, False),
        ("fc00::1", False, False),
        ("224.0.0.1", False, False),
        ("not-an-address", False, False),
    ],
)
def test_only_global_addresses_are_fetched_from_unless_the_site_allows_more(
    address, default, loopback_allowed
):
    assert address_allowed(address, HostPolicy()) is default
    assert address_allowed(address, LOOPBACK) is loopback_allowed


@pytest.mark.parametrize(
    ("policy", "host", "addresses", "refused"),
    [
        ("", "gitlab.example.org", ["140.82.121.4"], ""),
        ("", "gitlab.example.org", ["140.82.121.4", "10.0.0.5"], "non-public"),  # every one
        ("", "rebind.example", ["127.0.0.1"], "non-public"),  # a name resolving to 127.x
        ("", "h", [], "does not resolve"),
        ("gitlab.example.org", "gitlab.example.org", ["140.82.121.4"], ""),
        ("gitlab.example.org", "github.com", ["140.82.121.4"], "not in"),
        ("*.example.org", "git.example.org", ["140.82.121.4"], ""),
        ("*.example.org", "example.org.evil.net", ["140.82.121.4"], "not in"),
        ("gitlab.internal", "gitlab.internal", ["10.1.2.3"], "non-public"),
        ("gitlab.internal 10.1.2.3", "gitlab.internal", ["10.1.2.3"], ""),
        ("gitlab.example.org 127.0.0.1", "127.0.0.1", ["127.0.0.1"], ""),
        ("127.0.0.1", "localhost", ["127.0.0.1", "::1"], "non-public"),
    ],
)
def test_a_repository_host_is_allowed_only_with_all_its_addresses(policy, host, addresses, refused):
    reason = plan_host_refusal(host, addresses, parse_host_policy(policy))
    assert (refused in reason) if refused else reason == ""


def test_an_unknown_name_may_be_set_but_not_fetched():
    assert plan_host_refusal("gone.example", [], HostPolicy(), unknown_ok=True) == ""
    assert plan_host_refusal("gone.example", [], HostPolicy()) != ""
    named = parse_host_policy("gitlab.example.org")
    assert plan_host_refusal("other.example", [], named, unknown_ok=True) != ""


@pytest.mark.parametrize(
    ("url", "addresses"),
    [
        ("http://127.0.0.1:18399/x.git", ["127.0.0.1"]),
        ("http://localhost:22/", ["127.0.0.1"]),
        ("http://[::1]:18342/", ["::1"]),
        ("ssh://127.0.0.1:18342/x.git", ["127.0.0.1"]),
        ("git@intranet:x.git", ["192.168.0.7"]),
        ("https://gone.example/x.git", []),
        ("https://rebind.example/x.git", ["140.82.121.4", "127.0.0.1"]),
    ],
)
def test_every_refused_host_gets_the_same_message(url, addresses):
    with pytest.raises(UsageError) as refused:
        check_repo_host(url, HostPolicy(), lambda host, port: addresses)
    assert str(refused.value) == refused_message(repo_origin(url))
    assert "refused" not in str(refused.value) and "resolve" not in str(refused.value)


def test_a_host_the_site_allows_returns_its_addresses_for_the_fetch():
    resolver = {("127.0.0.1", 8080): ["127.0.0.1"]}
    url = "http://127.0.0.1:8080/r.git"
    assert check_repo_host(url, LOOPBACK, lambda h, p: resolver[h, p]) == ["127.0.0.1"]


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://GitLab.example.org/meca/r.git", "https://gitlab.example.org:443"),
        ("https://gitlab.example.org:8443/r.git", "https://gitlab.example.org:8443"),
        ("http://127.0.0.1:18340/mlmeca.git", "http://127.0.0.1:18340"),
        ("http://[::1]/r.git", "http://[::1]:80"),
        ("git@gitlab.example.org:meca/r.git", "ssh://gitlab.example.org:22"),
        ("ssh://git@gitlab.example.org:2222/r.git", "ssh://gitlab.example.org:2222"),
    ],
)
def test_a_url_connects_to_one_scheme_host_and_port(url, origin):
    assert str(repo_origin(url)) == origin


A = Origin("https", "gitlab.example.org", 443)


@pytest.mark.parametrize(
    ("url", "given", "drop", "stored", "kind"),
    [
        ("https://gitlab.example.org/other/r.git", "", False, "token", "token"),  # same host
        ("https://GITLAB.example.org:443/r.git", "", False, "token", "token"),
        ("https://evil.example/r.git", "token", False, "token", "token"),  # given again
        ("https://evil.example/r.git", "", True, "token", ""),  # dropped
        ("https://evil.example/r.git", "", False, "", ""),  # nothing stored
    ],
)
def test_a_stored_credential_stays_only_for_its_own_host(url, given, drop, stored, kind):
    assert check_credential_change(url, given, drop, stored, A) == kind


@pytest.mark.parametrize(
    ("url", "stored_for", "reason"),
    [
        ("https://evil.example/r.git", A, "given for https://gitlab.example.org:443"),
        ("https://gitlab.example.org:8443/r.git", A, "not https://gitlab.example.org:8443"),
        ("http://gitlab.example.org/r.git", A, "give the credential again"),
        ("http://127.0.0.1:18341/steal.git", Origin("http", "127.0.0.1", 18340), "again"),
        ("https://gitlab.example.org/r.git", None, "given for another host"),
    ],
)
def test_a_stored_credential_is_not_kept_for_another_scheme_host_or_port(url, stored_for, reason):
    with pytest.raises(UsageError, match=reason):
        check_credential_change(url, "", False, "token", stored_for)


def test_a_credential_given_with_a_plain_http_url_to_another_host_is_refused():
    with pytest.raises(UsageError, match="in clear"):
        check_credential_change("http://git.evil.example/x.git", "token", False, "", None)


def test_the_credentials_host_is_stored_beside_it_and_removed_with_it(tmp_path):
    layout = MaterialLayout(tmp_path).ensure()
    token = parse(b"deploy:glpat-12345678", "t")
    store_credential(layout, "c1", token, "https://gitlab.example.org/r.git")
    assert stored_host(layout, "c1") == A
    assert oct(layout.credential_host("c1").stat().st_mode & 0o777) == "0o600"
    store_credential(layout, "c1", None)
    assert stored_host(layout, "c1") is None and not layout.credential("c1").exists()


@pytest.mark.parametrize(
    ("url", "addresses", "expected"),
    [
        (
            "https://gitlab.example.org/r.git",
            ["140.82.121.4", "2606:4700::1"],
            ["http.curloptResolve=gitlab.example.org:443:140.82.121.4,[2606:4700::1]"],
        ),
        ("http://127.0.0.1:8080/r.git", ["127.0.0.1"], []),  # an address: nothing to pin
        ("ssh://git@gitlab.example.org/r.git", ["140.82.121.4"], []),  # ssh's HostName
    ],
)
def test_a_fetch_follows_no_redirect_and_connects_to_the_addresses_checked(
    url, addresses, expected
):
    options = plan_fetch_config(repo_origin(url), addresses)
    assert options[:2] == ["-c", "http.followRedirects=false"]
    assert options[2:][1::2] == expected


def test_ssh_connects_to_the_checked_address_under_the_hosts_name(tmp_path):
    layout = MaterialLayout(tmp_path)
    origin = repo_origin("git@gitlab.example.org:r.git")
    env = plan_credential_env(layout, "c1", "deploy-key", origin, "140.82.121.4")
    assert "HostName=140.82.121.4" in env["GIT_SSH_COMMAND"]
    assert "HostKeyAlias=gitlab.example.org" in env["GIT_SSH_COMMAND"]


@pytest.mark.parametrize(
    ("name", "garbage"),
    [
        ("ab/tmp_obj_XyZ123", True),
        ("pack/tmp_pack_AbC", True),
        ("pack/tmp_idx_AbC", True),
        ("pack/.tmp-123-pack-abc.pack", True),
        ("incoming-Xy12ab", True),
        ("ab/cdef0123456789", False),  # a complete object
        ("pack/pack-0123.pack", False),
        ("info/alternates", False),
        ("ab/cd/tmp_obj_x", False),
    ],
)
def test_a_failed_fetchs_partial_files_are_recognised(name, garbage):
    assert is_fetch_garbage(name) is garbage


def askpass(layout: MaterialLayout, prompt: str, host: str) -> subprocess.CompletedProcess[str]:
    env = {
        "COURSEHUB_GIT_CREDENTIAL": str(layout.credential("c1")),
        "COURSEHUB_GIT_CREDENTIAL_HOST": host,
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(
        [sys.executable, "-I", str(layout.askpass), prompt], env=env, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    ("prompt", "answer"),
    [
        ("Username for 'https://gitlab.example.org': ", "deploy"),
        ("Password for 'https://deploy@gitlab.example.org': ", "glpat-12345678"),
        ("Password for 'https://deploy@gitlab.example.org:443': ", "glpat-12345678"),
        ("Username for 'https://evil.example': ", None),  # a redirect to another host
        ("Password for 'https://deploy@gitlab.example.org:8443': ", None),
        ("Password for 'http://deploy@gitlab.example.org': ", None),
        ("Password: ", None),
    ],
)
def test_the_askpass_program_answers_only_for_the_credentials_host(tmp_path, prompt, answer):
    layout = MaterialLayout(tmp_path).ensure()
    store_credential(layout, "c1", parse(b"deploy:glpat-12345678", "t"))
    done = askpass(layout, prompt, str(A))
    if answer is None:
        assert done.returncode != 0 and done.stdout == ""
    else:
        assert (done.returncode, done.stdout) == (0, answer + "\n")

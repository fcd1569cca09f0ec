"""The tool's RSA key pair: made once on the course app's host, its public half served as a JWKS.

LTI Advantage services (grade passback) authenticate the tool to the
platform with a JWT signed by the tool's private key (IMS Security
Framework 1.0, section 4.1, https://www.imsglobal.org/spec/security/v1p0/#using-json-web-tokens-with-oauth-2-0-client-credentials-grant);
the platform checks it against the tool's public key set, which the LMS
administrator registers (Moodle: "Public key type: Keyset URL") as the
course app's ``/api/v1/lti/jwks.json``.

The private key is a PEM file (PKCS #8, unencrypted: the course app reads it
unattended), mode 0600, at ``$COURSEHUB_LTI_TOOL_KEY`` or
``<data dir>/lti/tool-key.pem`` (:func:`tool_key_path`), made by
``coursehub lti keygen`` (:func:`generate_key`). A key readable by other
users is refused. Its key id is the RFC 7638 thumbprint of the public key,
so the ``kid`` stays the same as long as the key does.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coursehub.atomicfile import write_atomically
from coursehub.errors import CoursehubError, UsageError
from coursehub.filemodes import ensure_private_dir
from coursehub.settings import data_dir

#: RSA modulus size: 2048 bits is the minimum of the IMS Security Framework 1.0, section 6.1.
KEY_BITS = 2048
#: Signature algorithm of the client assertion (IMS Security Framework 1.0, section 6.1).
ALGORITHM = "RS256"
#: Seconds a client assertion is valid (a few minutes, as RFC 7523 section 3 advises short).
ASSERTION_LIFETIME_S = 300
#: Largest key file read.
MAX_KEY_BYTES = 16384


class ToolKeyError(CoursehubError):
    """The tool's key pair is missing, unreadable or not private."""


def tool_key_path(environ: Mapping[str, str] | None = None) -> Path:
    """Return where the tool's private key lives: ``COURSEHUB_LTI_TOOL_KEY``, else
    ``lti/tool-key.pem`` in coursehub's data directory (not created)."""
    env = os.environ if environ is None else environ
    if env.get("COURSEHUB_LTI_TOOL_KEY"):
        return Path(env["COURSEHUB_LTI_TOOL_KEY"]).expanduser()
    return data_dir(env) / "lti" / "tool-key.pem"


def generate_key(path: Path, replace: bool = False) -> Path:
    """Write a new RSA private key to ``path`` (mode 0600, folder made 0700); return ``path``.

    Raises
    ------
    UsageError
        If ``path`` exists and ``replace`` is false: the platforms know its
        public key, and a new one breaks passback until they fetch the new set.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    if path.exists() and not replace:
        raise UsageError(
            f"{path} exists: the LMS platforms trust its public key; pass --force to replace "
            "it (platforms that cache the key set refuse passback until they fetch it again)"
        )
    if not path.parent.exists():
        ensure_private_dir(path.parent)
    key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    try:
        write_atomically(path, pem, 0o600)
    except OSError as exc:
        raise UsageError(f"cannot write the tool key {path}: {exc.strerror or exc}") from None
    return path


def load_private_key(path: Path) -> Any:
    """Return the RSA private key in ``path`` (a ``cryptography`` key object).

    Raises
    ------
    ToolKeyError
        Missing (run ``coursehub lti keygen``), readable by group or others,
        unreadable, or not an RSA private key.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    try:
        st = path.stat()
        if st.st_mode & 0o077 or not stat.S_ISREG(st.st_mode):
            raise ToolKeyError(
                f"the tool key {path} is readable by other users (mode "
                f"{stat.S_IMODE(st.st_mode):o}): chmod 600 it, or make a new one "
                "(coursehub lti keygen --force)"
            )
        data = path.read_bytes()[:MAX_KEY_BYTES]
    except FileNotFoundError:
        raise ToolKeyError(
            f"the tool has no key pair yet ({path}): run `coursehub lti keygen` on the course "
            "app's host, then register its key set URL in the LMS"
        ) from None
    except OSError as exc:
        raise ToolKeyError(f"cannot read the tool key {path}: {exc.strerror or exc}") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ToolKeyError(f"{path} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ToolKeyError(f"{path} is not an RSA private key (LTI uses RS256)")
    return key


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def thumbprint(n: str, e: str) -> str:
    """Return the RFC 7638 thumbprint of an RSA public key given as JWK members (pure).

    SHA-256 of the members ``e``, ``kty``, ``n`` in that order, JSON without
    spaces, base64url without padding (RFC 7638, sections 3.1-3.3).
    """
    canonical = json.dumps({"e": e, "kty": "RSA", "n": n}, separators=(",", ":"))
    return _b64url(hashlib.sha256(canonical.encode("ascii")).digest())


def public_jwk(private_key: Any) -> dict[str, str]:
    """Return the public JWK of ``private_key``: ``kty, n, e, kid, alg, use`` and nothing private.

    ``kid`` is the key's RFC 7638 thumbprint (:func:`thumbprint`).
    """
    from jwt.algorithms import RSAAlgorithm

    raw = RSAAlgorithm.to_jwk(private_key.public_key(), as_dict=True)
    n, e = str(raw["n"]), str(raw["e"])
    return {"kty": "RSA", "n": n, "e": e, "kid": thumbprint(n, e), "alg": ALGORITHM, "use": "sig"}


def public_jwks(private_key: Any) -> dict[str, list[dict[str, str]]]:
    """Return the tool's key set, ``{"keys": [public JWK]}`` (RFC 7517, section 5)."""
    return {"keys": [public_jwk(private_key)]}


def client_assertion(
    private_key: Any, client_id: str, token_url: str, now: float | None = None
) -> str:
    """Return the signed JWT the tool presents at the platform's token endpoint.

    Claims of RFC 7523 section 3 and IMS Security Framework 1.0 section 4.1.1:
    ``iss`` and ``sub`` the tool's client id, ``aud`` the token URL, ``iat``,
    ``exp`` (:data:`ASSERTION_LIFETIME_S` later) and a unique ``jti``; the
    header names the key (``kid``).
    """
    import jwt

    issued = int(time.time() if now is None else now)
    claims = {
        "iss": client_id,
        "sub": client_id,
        "aud": token_url,
        "iat": issued,
        "exp": issued + ASSERTION_LIFETIME_S,
        "jti": uuid.uuid4().hex,
    }
    kid = public_jwk(private_key)["kid"]
    return jwt.encode(claims, private_key, algorithm=ALGORITHM, headers={"kid": kid})

"""Reading a secret key file: hex text, owned by us or root, readable by nobody else.

A key that other local users can read is a key they hold. As ssh refuses an identity
file whose permissions are "too open", a key file is refused (``UserError`` naming the
config field, the file, its mode and the fix) when its group or others have any access,
when it is owned by another user than root or us, or when it is not a regular file.
The permissions are checked on the opened file (``fstat``), not on the path, so the
file cannot be swapped between the check and the read. The key is never in a message.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from manetkit.errors import UserError


def read_hex_key(path: Path, field: str, min_len: int, max_len: int) -> bytes:
    """The key in ``path`` (hex, surrounding whitespace ignored), ``min_len``-``max_len``
    bytes; ``field`` names the config field in every error."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise UserError(f"{field}: cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"{field}: {path} is not a regular file")
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            raise UserError(
                f"{field}: {path} has mode {mode:04o}: group and others must have no access "
                f"to a key (chmod 600 {path})"
            )
        if st.st_uid not in (0, os.geteuid()):
            raise UserError(
                f"{field}: {path} is owned by uid {st.st_uid}, not by root or by us "
                f"(uid {os.geteuid()}): another user could change the key"
            )
        raw = f.read(4 * max_len + 64)
    try:
        secret = bytes.fromhex(raw.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise UserError(f"{field}: {path} does not hold a hex key") from None
    if not min_len <= len(secret) <= max_len:
        raise UserError(f"{field}: {path} holds {len(secret)} bytes, need {min_len}-{max_len}")
    return secret

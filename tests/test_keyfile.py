"""Key files (manetkit/keyfile.py): refused when others may read or change them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from manetkit.errors import UserError
from manetkit.keyfile import read_hex_key
from manetkit.proxy.config import load_keyring, parse_config

KEY = bytes(range(32))


def key_file(tmp_path: Path, mode: int = 0o600, text: str = KEY.hex(), name: str = "k") -> Path:
    p = tmp_path / f"{name}.key"
    p.write_text(text + "\n")
    p.chmod(mode)
    return p


def test_a_key_only_its_owner_can_read_is_read(tmp_path: Path) -> None:
    assert read_hex_key(key_file(tmp_path), "auth.keys[0].key_file", 16, 64) == KEY
    assert read_hex_key(key_file(tmp_path, 0o400), "f", 16, 64) == KEY


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o610])
def test_a_key_others_can_reach_is_refused_naming_field_mode_and_fix(
    tmp_path: Path, mode: int
) -> None:
    p = key_file(tmp_path, mode)
    with pytest.raises(UserError) as e:
        read_hex_key(p, "auth.keys[0].key_file", 16, 64)
    msg = str(e.value)
    assert msg.startswith("auth.keys[0].key_file: ") and f"{mode:04o}" in msg
    assert f"chmod 600 {p}" in msg and KEY.hex() not in msg


def test_a_link_another_owner_or_bad_contents_are_refused(tmp_path: Path) -> None:
    p = key_file(tmp_path)
    link = tmp_path / "link.key"
    link.symlink_to(p)
    with pytest.raises(UserError, match="cannot read"):
        read_hex_key(link, "f", 16, 64)
    if os.geteuid() == 0:
        os.chown(p, 65534, 65534)
        with pytest.raises(UserError, match="owned by uid 65534"):
            read_hex_key(p, "f", 16, 64)
    with pytest.raises(UserError, match="does not hold a hex key"):
        read_hex_key(key_file(tmp_path, text="not hex", name="b"), "f", 16, 64)
    with pytest.raises(UserError, match="holds 8 bytes, need 16-64"):
        read_hex_key(key_file(tmp_path, text="00" * 8, name="c"), "f", 16, 64)


def test_the_proxy_reads_its_mesh_keys_with_the_check(tmp_path: Path) -> None:
    p = key_file(tmp_path)
    cfg = parse_config({"auth": {"keys": [{"id": 3, "key_file": str(p)}]}})
    ring = load_keyring(cfg)
    assert ring.required and ring.signing is not None and ring.signing.id == 3
    assert ring.signing.secret == KEY and KEY.hex() not in repr(ring)
    p.chmod(0o644)
    with pytest.raises(UserError, match=r"auth.keys\[0\].key_file: .* mode 0644"):
        load_keyring(cfg)
    assert not load_keyring(parse_config({})).keys  # no auth: ephemeral keys only

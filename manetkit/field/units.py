"""The systemd units a laptop runs manetkit with (shipped in ``manetkit/field/systemd/``).

``manetkit-ibss@IF.service`` joins the IBSS cell on IF (``manetkit field ibss-up``),
``manetkit-daemon.service`` runs the routing daemon and ``manetkit-proxy.service`` the
split-TCP proxy, with their configs in ``/etc/manetkit/`` (docs/field.md, "systemd").
The files are usable as shipped (console script in ``/usr/local/bin``, where pip puts it
for root on Debian); ``field-tests/node-up --systemd`` installs them with its own paths.
"""

from __future__ import annotations

from importlib import resources

NAMES = ("manetkit-ibss@", "manetkit-daemon", "manetkit-proxy")
SHIPPED_BIN = "/usr/local/bin/manetkit"
SHIPPED_CONFIG_DIR = "/etc/manetkit"


def text(name: str) -> str:
    """The shipped unit file ``name`` (one of :data:`NAMES`, without ``.service``)."""
    if name not in NAMES:
        raise ValueError(f"no unit {name!r} (units: {', '.join(NAMES)})")
    return resources.files("manetkit.field").joinpath(f"systemd/{name}.service").read_text()


def render(name: str, manetkit: str = SHIPPED_BIN, config_dir: str = SHIPPED_CONFIG_DIR) -> str:
    """Unit ``name`` with another path of the console script and of the config directory."""
    return (
        text(name)
        .replace(SHIPPED_BIN, manetkit)
        .replace(f"{SHIPPED_CONFIG_DIR}/", f"{config_dir.rstrip('/')}/")
    )

"""A local certificate authority and one broker certificate, made with the JDK's keytool.

The broker certificate names ``IP:127.0.0.1`` and ``DNS:localhost`` as subject alternative
names, so clients keep TLS hostname verification on. Made once per cluster folder; the CA's
certificate (PEM) is what clients trust (``ssl.ca.location``).
"""

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from eos_assets.lib.errors import BrokerError

_SAN = "SAN=IP:127.0.0.1,DNS:localhost"
_DAYS = "365"


@dataclass(frozen=True)
class BrokerTls:
    """The files of a cluster's TLS: the broker keystore (PKCS12) and the CA certificate."""

    keystore: str
    password: str
    ca_pem: str


def ensure_tls(folder: Path, java: str) -> BrokerTls:
    """Make the CA and the broker keystore in ``folder`` unless they exist; return them.

    Raises:
        BrokerError: keytool is missing next to ``java`` or fails.
    """
    folder.mkdir(parents=True, exist_ok=True)
    secret = folder / "keystore.password"
    keystore, ca_pem = folder / "broker.p12", folder / "ca.pem"
    if keystore.exists() and ca_pem.exists() and secret.exists():
        return BrokerTls(str(keystore), secret.read_text().strip(), str(ca_pem))
    password = secrets.token_urlsafe(18)
    keytool = str(Path(java).resolve().parent / "keytool")
    ca_store = folder / "ca.p12"
    for stale in (ca_store, keystore, ca_pem):
        stale.unlink(missing_ok=True)
    store = ["-storetype", "PKCS12", "-storepass", password]
    new_key = ["-genkeypair", "-keyalg", "RSA", "-keysize", "2048", "-validity", _DAYS]
    steps = [
        [*new_key, "-alias", "ca", "-dname", "CN=eos-assets local CA", "-ext", "bc:c",
         "-keystore", str(ca_store), *store],
        ["-exportcert", "-rfc", "-alias", "ca", "-keystore", str(ca_store), *store,
         "-file", str(ca_pem)],
        [*new_key, "-alias", "broker", "-dname", "CN=localhost", "-ext", _SAN,
         "-keystore", str(keystore), *store],
        ["-certreq", "-alias", "broker", "-keystore", str(keystore), *store,
         "-file", str(folder / "broker.csr")],
        ["-gencert", "-rfc", "-alias", "ca", "-keystore", str(ca_store), *store, "-ext", _SAN,
         "-validity", _DAYS, "-infile", str(folder / "broker.csr"),
         "-outfile", str(folder / "broker.pem")],
        ["-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem),
         "-keystore", str(keystore), *store],
        ["-importcert", "-noprompt", "-alias", "broker", "-file", str(folder / "broker.pem"),
         "-keystore", str(keystore), *store],
    ]  # fmt: skip
    for step in steps:
        _keytool(keytool, step)
    secret.write_text(password)
    return BrokerTls(str(keystore), password, str(ca_pem))


def _keytool(keytool: str, args: list[str]) -> None:
    try:
        done = subprocess.run(
            [keytool, *args], capture_output=True, text=True, timeout=120, check=False
        )
    except FileNotFoundError:
        raise BrokerError(
            f"keytool is missing ({keytool}): install a full JDK 17 (Debian: "
            "openjdk-17-jdk-headless) to make the cluster's certificates"
        ) from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
        raise BrokerError(f"keytool {args[0]} failed: {lines[-1]}")

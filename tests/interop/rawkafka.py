"""A tiny raw Kafka protocol client for tests that must see exactly what a
server answers (every broker address in Metadata and FindCoordinator, error
codes of group APIs sent to the wrong node), whatever a client library would
do with it. Only the requests the tests need, every version of each."""

import socket
import struct

NOT_COORDINATOR = 16
UNKNOWN_MEMBER_ID = 25

# API key -> first flexible version (request header v2, response header v1).
FLEXIBLE_FROM = {3: 9, 9: 6, 10: 3, 12: 4, 18: 3}


class Writer:
    def __init__(self):
        self.parts = []

    def raw(self, b):
        self.parts.append(b)
        return self

    def int8(self, v):
        return self.raw(struct.pack(">b", v))

    def int16(self, v):
        return self.raw(struct.pack(">h", v))

    def int32(self, v):
        return self.raw(struct.pack(">i", v))

    def bool(self, v):
        return self.int8(1 if v else 0)

    def uvarint(self, v):
        out = bytearray()
        while True:
            b = v & 0x7F
            v >>= 7
            if v:
                out.append(b | 0x80)
            else:
                out.append(b)
                return self.raw(bytes(out))

    def string(self, s, compact=False):
        if s is None:
            return self.uvarint(0) if compact else self.int16(-1)
        b = s.encode()
        return (self.uvarint(len(b) + 1) if compact else self.int16(len(b))).raw(b)

    def array_len(self, n, compact=False):
        if n is None:
            return self.uvarint(0) if compact else self.int32(-1)
        return self.uvarint(n + 1) if compact else self.int32(n)

    def tags(self):
        return self.uvarint(0)

    def bytes(self):
        return b"".join(self.parts)


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"truncated response: need {n} bytes at {self.pos} of {len(self.data)}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def int8(self):
        return struct.unpack(">b", self.take(1))[0]

    def int16(self):
        return struct.unpack(">h", self.take(2))[0]

    def int32(self):
        return struct.unpack(">i", self.take(4))[0]

    def int64(self):
        return struct.unpack(">q", self.take(8))[0]

    def bool(self):
        return self.int8() != 0

    def uuid(self):
        return self.take(16)

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def string(self, compact=False):
        n = self.uvarint() - 1 if compact else self.int16()
        return None if n < 0 else self.take(n).decode()

    def array(self, item, compact=False):
        n = self.uvarint() - 1 if compact else self.int32()
        return None if n < 0 else [item() for _ in range(n)]

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def done(self):
        return self.pos == len(self.data)


class Conn:
    """One connection; request() sends a request and returns the response
    body (after the response header) as bytes."""

    def __init__(self, addr, timeout=30):
        host, port = addr.rsplit(":", 1)
        self.addr = addr
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation = 0

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _recv(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"{self.addr} closed the connection")
            buf += chunk
        return bytes(buf)

    def request(self, api_key, version, body):
        self.correlation += 1
        flexible = version >= FLEXIBLE_FROM.get(api_key, 1 << 15)
        h = Writer().int16(api_key).int16(version).int32(self.correlation).string("kcoord-interop-raw")
        if flexible:
            h.tags()
        frame = h.bytes() + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", self._recv(4))[0]
        resp = self._recv(size)
        r = Reader(resp)
        assert r.int32() == self.correlation, "correlation id"
        # ApiVersions answers with header v0 whatever the version.
        if flexible and api_key != 18:
            r.tags()
        return resp[r.pos:]


def api_versions(conn):
    """{api_key: (min, max)} from ApiVersions v0."""
    r = Reader(conn.request(18, 0, b""))
    err = r.int16()
    assert err == 0, f"ApiVersions error {err}"
    out = {}
    for key, lo, hi in r.array(lambda: (r.int16(), r.int16(), r.int16())):
        out[key] = (lo, hi)
    return out


def metadata_request(version, topics=None):
    """Metadata request body; topics None means every topic (v1+)."""
    flex = version >= 9
    w = Writer()
    w.array_len(None if topics is None else len(topics), flex)
    for t in topics or []:
        if version >= 10:
            w.raw(b"\0" * 16)
        w.string(t, flex)
        if flex:
            w.tags()
    if version >= 4:
        w.bool(False)  # allow_auto_topic_creation
    if 8 <= version <= 10:
        w.bool(False)  # include_cluster_authorized_operations
    if version >= 8:
        w.bool(False)  # include_topic_authorized_operations
    if flex:
        w.tags()
    return w.bytes()


def parse_metadata(version, body, strict=True):
    """Parses a Metadata response (v1-v13) completely. Not strict: trailing
    zero bytes are tolerated (librdkafka's mock cluster adds one to every
    flexible response)."""
    flex = version >= 9
    r = Reader(body)
    out = {"brokers": {}, "topics": {}}
    if version >= 3:
        r.int32()  # throttle

    def broker():
        node = r.int32()
        host = r.string(flex)
        port = r.int32()
        r.string(flex)  # rack
        if flex:
            r.tags()
        out["brokers"][node] = f"{host}:{port}"

    r.array(broker, flex)
    if version >= 2:
        out["cluster_id"] = r.string(flex)
    out["controller_id"] = r.int32()

    def partition():
        p = {"error": r.int16(), "partition": r.int32(), "leader": r.int32()}
        if version >= 7:
            r.int32()  # leader epoch
        p["replicas"] = r.array(r.int32, flex)
        p["isr"] = r.array(r.int32, flex)
        if version >= 5:
            r.array(r.int32, flex)  # offline replicas
        if flex:
            r.tags()
        return p

    def topic():
        err = r.int16()
        name = r.string(flex)
        if version >= 10:
            r.uuid()
        r.bool()  # is_internal
        parts = r.array(partition, flex)
        if version >= 8:
            r.int32()  # topic authorized operations
        if flex:
            r.tags()
        out["topics"][name] = {"error": err, "partitions": parts}

    r.array(topic, flex)
    if 8 <= version <= 10:
        r.int32()  # cluster authorized operations
    if version >= 13:
        out["error"] = r.int16()
    if flex:
        r.tags()
    check_end(r, f"Metadata v{version}", strict)
    return out


def check_end(r, what, strict):
    rest = r.data[r.pos:]
    assert not rest or (not strict and not rest.strip(b"\0")), f"{what}: {len(rest)} trailing bytes {rest[:16].hex()}"


def metadata(conn, version, topics=None, strict=True):
    body = conn.request(3, version, metadata_request(version, topics))
    return parse_metadata(version, body, strict), body


def find_coordinator(conn, version, key, key_type=0, strict=True):
    """FindCoordinator v1-v6 for one key; returns ({error, node, addr}, raw body)."""
    flex = version >= 3
    w = Writer()
    if version <= 3:
        w.string(key, flex).int8(key_type)
    else:
        w.int8(key_type).array_len(1, True).string(key, True)
    if flex:
        w.tags()
    body = conn.request(10, version, w.bytes())
    r = Reader(body)
    r.int32()  # throttle
    if version <= 3:
        err = r.int16()
        r.string(flex)  # error message
        node, host, port = r.int32(), r.string(flex), r.int32()
    else:
        coords = r.array(lambda: (r.string(True), r.int32(), r.string(True), r.int32(), r.int16(), r.string(True), r.tags()), True)
        assert len(coords) == 1 and coords[0][0] == key, coords
        _, node, host, port, err, _, _ = coords[0]
    if flex:
        r.tags()
    check_end(r, f"FindCoordinator v{version}", strict)
    return {"error": err, "node": node, "addr": f"{host}:{port}"}, body


def heartbeat(conn, group, generation=1, member="nobody", version=0):
    """Heartbeat v0 with a made-up member; returns the error code."""
    w = Writer().string(group).int32(generation).string(member)
    r = Reader(conn.request(12, version, w.bytes()))
    return r.int16()


def offset_fetch_error(conn, group, topic, partitions):
    """OffsetFetch v3 for some partitions; returns (group error, [partition errors])."""
    w = Writer().string(group).array_len(1).string(topic).array_len(len(partitions))
    for p in partitions:
        w.int32(p)
    r = Reader(conn.request(9, 3, w.bytes()))
    r.int32()  # throttle
    errs = []

    def part():
        r.int32()
        r.int64()
        r.string()
        errs.append(r.int16())

    r.array(lambda: (r.string(), r.array(part)))
    return r.int16(), errs


def mentions_port(body, port):
    """Whether a response body contains `port` as a big-endian int32 or as a
    decimal string (after a ':')."""
    return struct.pack(">i", port) in body or f":{port}".encode() in body or str(port).encode() in body

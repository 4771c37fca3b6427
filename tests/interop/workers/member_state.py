"""The JSON state file every group member worker keeps for its test: what
it owns, how often it was assigned and revoked, what it consumed. Written
atomically (a temporary file renamed over it), so a test reading it never
sees half a file, even when it kills the worker."""

import json
import os


class MemberState(dict):
    def __init__(self, path, **extra):
        super().__init__(pid=os.getpid(), assigned=[], generations=0, revocations=0, **extra)
        self.path = path

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self, f)
        os.replace(tmp, self.path)

"""Stand-in for the preflight child that succeeds and counts its runs (one line appended to $PROBE_COUNT).
Declared in tests/conftest.py; used only through VAULT2OKF_LLAMA_PROBE, to see when the cached result is used."""

import json
import os

with open(os.environ["PROBE_COUNT"], "a") as count:
    count.write("run\n")
print(json.dumps({"tokens": 4}))

"""Stand-in for llama.cpp's decode in the preflight child: dies by SIGSEGV, as the AMX path does on an AMX CPU
(llama.cpp issue 20824). Declared in tests/conftest.py; used only through VAULT2OKF_LLAMA_PROBE."""

import os
import signal

os.kill(os.getpid(), signal.SIGSEGV)

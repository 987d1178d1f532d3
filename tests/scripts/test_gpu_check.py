#!/usr/bin/env python3
"""CPU test of scripts/gpu_check.sh's verdict when the GPU tests skip: on a machine without a usable GPU, a fake
nvidia-smi that answers makes the script go on, every GPU test then skips, and the script must exit non-zero and
say so (a run where nothing ran is not a pass). On a machine with a real GPU this test has nothing to check and
passes with a note. Also checks exit 77 when nvidia-smi fails.
Usage: test_gpu_check.py BUILD_DIR. Exits non-zero with a message on the first failure."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def check(cond, what, out=""):
    if not cond:
        sys.exit(f"test_gpu_check: FAILED: {what}\n{out}")


def gpu_check(build, tmp, smi_rc):
    fake = os.path.join(tmp, f"bin{smi_rc}")
    os.makedirs(fake, exist_ok=True)
    with open(os.path.join(fake, "nvidia-smi"), "w") as f:
        f.write(f"#!/bin/sh\necho 'GPU 0: fake'\nexit {smi_rc}\n")
    os.chmod(os.path.join(fake, "nvidia-smi"), 0o755)
    env = dict(os.environ, PATH=fake + os.pathsep + os.environ["PATH"], FMHA_GTEST_FILTER="FwdGpu.*")
    p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_check.sh"), build, os.path.join(tmp, "out"),
                        "tests,cli"], capture_output=True, text=True, env=env, timeout=600)
    return p.returncode, p.stdout + p.stderr


def main():
    build = os.path.abspath(sys.argv[1])
    for exe in ("tests/fmha_gpu_tests", "bin/fmha_fwd"):  # else gpu_check.sh would run setup.sh (a full build)
        check(os.access(os.path.join(build, exe), os.X_OK), f"{build}/{exe} missing: build the tests and tools first")
    try:
        real = subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except OSError:
        real = False
    if real:
        print("test_gpu_check: a real GPU is present; the skip verdict is not exercised here")
        return
    with tempfile.TemporaryDirectory() as tmp:
        rc, out = gpu_check(build, tmp, 1)
        check(rc == 77, f"nvidia-smi failing: expected exit 77, got {rc}", out)
        rc, out = gpu_check(build, tmp, 0)
        check(rc != 0, "every GPU test skipped: expected a non-zero exit", out)
        check("FAILED:" in out and "tests skipped" in out, "every GPU test skipped: expected a FAILED line", out)
        check("runs skipped" in out, "the CLI matrix skipped: expected a FAILED line", out)
    print("test_gpu_check: all checks passed")


if __name__ == "__main__":
    main()

"""What scripts/ share to find their PyPI packages: scripts/setup.sh installs them into the project's
.venv, and a script whose own Python lacks them runs again there (once), or says what it needs."""
import os
import sys

VENV_PYTHON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".venv", "bin", "python3")


def run_in_venv(script, needs):
    """Start this script again under .venv's Python; without one (or already in it), exit naming `needs`."""
    if os.path.exists(VENV_PYTHON) and not os.environ.get("GPTMEM_IN_VENV"):
        os.environ["GPTMEM_IN_VENV"] = "1"
        os.execv(VENV_PYTHON, [VENV_PYTHON] + sys.argv)
    sys.exit(f"error: {script} needs {needs} (PyPI): run scripts/setup.sh, which installs them into .venv")

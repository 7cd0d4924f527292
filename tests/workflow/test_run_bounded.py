"""run_bounded: a busy machine stretches a command's wall-clock time, which must not fail a test."""

import sys

import pytest
from conftest import HANG_FACTOR, run_bounded


def test_a_command_slower_than_its_budget_in_wall_clock_time_passes():
    """Waiting (for shared cores, here asleep) past the budget is fine; only a hang's wall time fails."""
    result = run_bounded([sys.executable, "-c", "import time; time.sleep(0.6); print('done')"], budget_s=0.2)
    assert result.returncode == 0 and result.stdout == "done\n"


def test_a_hung_command_fails_after_the_hang_factor():
    with pytest.raises(pytest.fail.Exception, match=f"{HANG_FACTOR}x its budget: hung"):
        run_bounded([sys.executable, "-c", "import time; time.sleep(30)"], budget_s=0.1)


def test_a_runaway_command_is_stopped_by_its_cpu_time():
    with pytest.raises(pytest.fail.Exception, match="used over 2 CPU seconds"):
        run_bounded([sys.executable, "-c", "while True: pass"], budget_s=1)

"""The rules' params and inputs come from named functions (documented, testable, one copy), never from
lambdas in the .smk files."""

import re
from pathlib import Path

RULES = Path(__file__).resolve().parents[1] / "workflow" / "rules"


def test_no_rule_file_holds_a_lambda():
    found = [
        f"{path.relative_to(RULES)}:{number}"
        for path in sorted(RULES.rglob("*.smk"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\blambda\b", line.split("#", 1)[0])
    ]
    assert not found, f"lambdas in rules (name them in the track's common file): {found}"

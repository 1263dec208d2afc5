"""SKILL.md as an agent reads it: every SQL example in it runs, through the sql tool's read-only gate, on a
converted shared vault; the tools, link direction and property keys are documented."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from retriever.agent.tools import TOOL_SPECS, BundleTools
from vault2okf.convert import convert
from vault2okf.skill import RECIPES, property_keys, skill_text

VAULT = Path(__file__).resolve().parents[2] / "shared" / "vaults" / "children-of-ash"
SQL_BLOCK = re.compile(r"^```sql\n(.*?)^```", re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("skill") / "children-of-ash"
    convert(VAULT, out)
    return out


def statements(skill: str) -> list[str]:
    """Every statement of every ```sql block, split by DuckDB's own parser."""
    found = []
    for block in SQL_BLOCK.findall(skill):
        found += [s.query.strip() for s in duckdb.extract_statements(block)]
    return found


def test_every_sql_example_in_skill_md_runs_through_the_sql_tool(bundle: Path) -> None:
    skill = (bundle / "SKILL.md").read_text("utf-8")
    examples = statements(skill)
    assert len(examples) >= len(RECIPES) + 3  # the recipes and the overview block
    tools = BundleTools(bundle)
    empty = []
    for sql in examples:
        result = tools.call("sql", {"query": sql})
        assert not result.is_error, f"{sql}\n{result.text}"
        if '"rows": []' in result.text:
            empty.append(sql)
    # the recipes that name a children-of-ash note find something there; the placeholder ones may not
    assert all("Some/Concept" in s or "'dead'" in s or "'npc'" in s for s in empty), empty


def test_the_recipes_answer_what_they_say_on_the_shared_vault(bundle: Path) -> None:
    tools = BundleTools(bundle)
    by_purpose = {purpose: tools.sql(sql.rstrip(";")) for purpose, sql in RECIPES}
    backlinks = next(v for k, v in by_purpose.items() if k.startswith("Backlinks"))
    assert "Factions/PMC/Ashfall" in [r[0] for r in backlinks["rows"]]  # Ashfall's doc mentions its commander
    sessions = next(v for k, v in by_purpose.items() if k.startswith("Sessions in order"))
    numbers = [r[1] for r in sessions["rows"]]
    assert numbers == sorted(numbers) and len(numbers) == 12
    broken = next(v for k, v in by_purpose.items() if k.startswith("Broken"))
    assert [r[0] for r in broken["rows"]] == ["Locations/Virelian Wastes", "Locations/Virelian Wastes"]


def test_skill_md_documents_the_tools_the_direction_and_every_column(bundle: Path) -> None:
    skill = (bundle / "SKILL.md").read_text("utf-8")
    for tool in (*TOOL_SPECS, "link_health", "list_bundles"):
        assert f"`{tool}(" in skill, tool
    assert "FROM `source_id`" in skill and "TO `target_id`" in skill
    assert "(frontmatter::JSON->>'key')" in skill
    with duckdb.connect(str(bundle / "okf.duckdb"), read_only=True) as con:
        for table in ("concepts", "links"):
            for (column,) in con.execute(f"SELECT column_name FROM (DESCRIBE {table})").fetchall():
                assert column in skill, (table, column)


def test_property_keys_per_type_are_listed_when_given() -> None:
    keys = property_keys([("NPC", '{"status": "dead", "race": "elf"}'), ("NPC", '{"age": 3}'), ("Place", "{}")])
    assert keys == {"NPC": ["age", "race", "status"], "Place": []}
    text = skill_text("v", "v", {"NPC": 2, "Place": 1}, {"notes": 3}, properties=keys)
    assert "## Property keys per type" in text
    assert "- `NPC`: `age`, `race`, `status`" in text and "- `Place`: (none)" in text
    assert "## Property keys per type" not in skill_text("v", "v", {"NPC": 2}, {"notes": 2})

"""A coding agent's session, recorded in the style of the harnesses that send it, in each API's shape.

One session of five tasks, 30 model requests in all: each task is the human's message, then tool loops
(the model calls a tool, the harness sends the tool's output back) until the model answers in text.
What the harnesses wrap around the human's words is here as they send it:

- **Messages (Claude Code)**: the session continues a compacted one (its first user message opens
  with the summary block "This session is being continued from a previous conversation ..."),
  ``<system-reminder>`` blocks as their own text blocks beside the human's text and after tool
  results, tool results as ``tool_result`` blocks;
- **Responses (Codex)**: ``instructions``, the AGENTS.md preamble and ``<environment_context>`` as user
  messages of their own, the compacted history's summary ("Another language model started to solve
  this problem ..."), ``function_call_output`` items;
- **Chat (an OpenAI-compatible agent loop)**: a system prompt, the compaction summary as a user message,
  ``<system-reminder>`` blocks inside the human's message text and inside tool results.

The model's side comes from the fake upstreams (tool calls while a task's recorded outputs last, then
text); :func:`human_turns` is what the human wrote, the text the router must route on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Task:
    """The human's message and the outputs of the tools the model calls for it, in order."""

    human: str
    outputs: tuple[str, ...]

    @property
    def rounds(self) -> int:
        return len(self.outputs)


_PYTEST_FAIL = """============================= test session starts ==============================
collected 48 items

tests/test_invoice.py ........F.....                                       [ 29%]
tests/test_tax.py ..F.......                                               [ 50%]

=================================== FAILURES ===================================
_______________________ test_rounding_of_mixed_vat_rates _______________________
    def test_rounding_of_mixed_vat_rates():
        invoice = Invoice(lines=[Line(19.99, vat=0.07), Line(5.01, vat=0.19)])
>       assert invoice.total == Decimal("27.35")
E       AssertionError: assert Decimal('27.34') == Decimal('27.35')
========================= 2 failed, 46 passed in 0.84s ========================="""

TASKS: tuple[Task, ...] = (
    Task(
        "The invoice totals are off by a cent when an invoice mixes VAT rates. Find out why and fix it.",
        (
            "src/billing/__init__.py\nsrc/billing/invoice.py\nsrc/billing/tax.py\ntests/test_invoice.py\ntests/test_tax.py",
            "src/billing/invoice.py:41:        return sum(round(line.net * (1 + line.vat), 2) for line in self.lines)\n"
            "src/billing/tax.py:12:def vat_of(net: Decimal, rate: Decimal) -> Decimal:",
            "     38\t    @property\n     39\t    def total(self) -> Decimal:\n     40\t        # per line, as the old system did\n"
            "     41\t        return sum(round(line.net * (1 + line.vat), 2) for line in self.lines)",
            _PYTEST_FAIL,
            "The file src/billing/invoice.py has been updated. Here's the result of running `cat -n` on a snippet:\n"
            "     41\t        return quantize(sum(line.net * (1 + line.vat) for line in self.lines))",
        ),
    ),
    Task(
        "Good. Now run the whole test suite and tell me if anything else broke.",
        (
            "============================= 48 passed in 0.91s ==============================",
            "ruff check src tests\nAll checks passed!",
            "mypy src\nSuccess: no issues found in 23 source files",
            "git status --short\n M src/billing/invoice.py\n M tests/test_invoice.py",
        ),
    ),
    Task(
        "Add a regression test with three lines at 7%, 19% and 0% VAT, each with a price ending in .005.",
        (
            "     1\timport pytest\n     2\tfrom decimal import Decimal\n     3\tfrom billing.invoice import Invoice, Line",
            "The file tests/test_invoice.py has been updated.",
            "tests/test_invoice.py::test_half_cent_prices_round_once FAILED\nE  assert Decimal('3.02') == Decimal('3.03')",
            "     12\tdef quantize(value: Decimal) -> Decimal:\n     13\t    return value.quantize(Decimal('0.01'))",
            "The file src/billing/tax.py has been updated: ROUND_HALF_UP.",
            "tests/test_invoice.py::test_half_cent_prices_round_once PASSED\n=============== 49 passed in 0.88s ===============",
        ),
    ),
    Task(
        "Write the changelog entry for this fix, two sentences, plain words.",
        (
            "CHANGELOG.md:1:# Changelog\nCHANGELOG.md:3:## 2.4.1",
            "     1\t# Changelog\n     2\t\n     3\t## 2.4.1\n     4\t- Exports no longer drop the last page.",
            "The file CHANGELOG.md has been updated.",
            "git diff --stat\n CHANGELOG.md | 2 ++\n 1 file changed, 2 insertions(+)",
        ),
    ),
    Task(
        "Commit it all with a message that explains the rounding change.",
        (
            "git add -A\n",
            "git diff --cached --stat\n 4 files changed, 38 insertions(+), 6 deletions(-)",
            "[fix-vat-rounding 4f2a9c1] Round invoice totals once, half up\n 4 files changed, 38 insertions(+), 6 deletions(-)",
            "git log --oneline -1\n4f2a9c1 Round invoice totals once, half up",
            "On branch fix-vat-rounding\nnothing to commit, working tree clean",
            "git status -sb\n## fix-vat-rounding",
        ),
    ),
)
#: model requests of the session: each task's tool rounds, and its text answer
REQUESTS = sum(task.rounds + 1 for task in TASKS)
assert REQUESTS == 30

SYSTEM = "You are an interactive CLI tool that helps users with software engineering tasks."
CLAUDE_SUMMARY = (
    "This session is being continued from a previous conversation that ran out of context. The summary below "
    "covers the earlier portion of the conversation.\n\nSummary:\n1. Primary Request and Intent:\n   The user asked "
    "for a CSV export of invoices and a poem for the release notes.\n2. Key Technical Concepts:\n   - Decimal "
    "arithmetic, VAT rates\n3. Pending Tasks:\n   - none"
)
CODEX_SUMMARY = (
    "Another language model started to solve this problem and produced a summary of its thinking process. You also "
    "have access to the state of the tools that were used by that language model. Use this to build on the work "
    "that has already been done and avoid duplicating work. Here is the summary produced by the other language "
    "model, use the information in this summary to assist with your own analysis:\nExported invoices to CSV."
)
REMINDER_CONTEXT = (
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\n"
    "Codebase and user instructions are shown below.\n- Run the tests before committing.\n</system-reminder>"
)
REMINDER_TODO = (
    "<system-reminder>\nThe TodoWrite tool hasn't been used recently. If you're working on tasks that would benefit "
    "from tracking progress, consider using the TodoWrite tool.\n</system-reminder>"
)
AGENTS_MD = (
    "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nRun `pytest -q` before you commit. Keep functions short."
    "\n</INSTRUCTIONS>"
)
ENVIRONMENT = (
    "<environment_context>\n  <cwd>/repo</cwd>\n  <approval_policy>on-request</approval_policy>\n  "
    "<sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted</network_access>\n  "
    "<shell>bash</shell>\n</environment_context>"
)
TOOLS = {
    "chat": [
        {
            "type": "function",
            "function": {
                "name": "shell",
                "description": "Run a command",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
        }
    ],
    "responses": [
        {
            "type": "function",
            "name": "shell",
            "description": "Run a command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        }
    ],
    "messages": [
        {
            "name": "Bash",
            "description": "Run a command",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
        }
    ],
}


def human_turns(upto: int) -> list[str]:
    """What the human wrote in the first ``upto`` tasks (what the router must route on)."""
    return [task.human for task in TASKS[:upto]]


def human_message(api: str, task: int) -> list[dict[str, Any]]:
    """The message(s) the harness appends for task ``task``'s human turn, with what it injects."""
    human = TASKS[task].human
    if api == "messages":
        blocks = [{"type": "text", "text": text} for text in ([CLAUDE_SUMMARY] if task == 0 else [])]
        blocks += [{"type": "text", "text": REMINDER_CONTEXT}, {"type": "text", "text": human}]
        return [{"role": "user", "content": blocks}]
    if api == "responses":
        said = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": human}]}]
        if task > 0:
            return said
        injected = [AGENTS_MD, ENVIRONMENT, CODEX_SUMMARY]
        return [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]} for t in injected
        ] + said
    opening = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": CLAUDE_SUMMARY}] if task == 0 else []
    return [*opening, {"role": "user", "content": f"{REMINDER_CONTEXT}\n{human}"}]


def tool_result(api: str, call_id: str, task: int, step: int) -> list[dict[str, Any]]:
    """What the harness sends back for the model's call ``call_id``: the recorded output of step ``step``."""
    output = TASKS[task].outputs[step]
    if api == "messages":
        result = {"type": "tool_result", "tool_use_id": call_id, "content": output}
        return [{"role": "user", "content": [result, {"type": "text", "text": REMINDER_TODO}]}]
    if api == "responses":
        return [{"type": "function_call_output", "call_id": call_id, "output": output}]
    return [{"role": "tool", "tool_call_id": call_id, "content": f"{output}\n\n{REMINDER_TODO}"}]

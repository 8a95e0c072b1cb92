"""The command line reference, generated from the argparse parser at build time (a MkDocs hook).

`docs/cli.md` holds the line `<!-- cli-reference -->`; this hook puts in its place one section
per subcommand of `onnx_studio.engine.cli.build_parser()`: the help line, the usage and every
argument with its value, choices, default and help. Nothing is copied by hand, so the page says
what the parser accepts. A marker missing from the page, or a parser that does not import,
fails the build.
"""

from __future__ import annotations

import argparse
import html
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mkdocs.exceptions import PluginError

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

MARKER = "<!-- cli-reference -->"
PAGE = "cli.md"
ROOT = Path(__file__).resolve().parents[2]  # the checkout: its parser, not an installed one
WIDTH = 88  # usage lines wrap here, whatever the terminal that runs the build


def load_parser() -> argparse.ArgumentParser:
    """The checkout's `onnx-studio` parser."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from onnx_studio.engine.cli import build_parser

    return build_parser()


def subcommands(parser: argparse.ArgumentParser
                ) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each subcommand, in the order they were added."""
    # argparse keeps subcommands in private attributes; the help text lives only there
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # an alias names the same parser again
                    seen.add(id(sub))
                    yield name, helps.get(name, ""), sub


def usage(parser: argparse.ArgumentParser) -> str:
    """The parser's usage line, wrapped at WIDTH columns."""
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups,
                        prefix="usage: ")
    return formatter.format_help().strip()


def escape(text: str) -> str:
    """Help text as literal Markdown: no emphasis, links or HTML made of its characters."""
    text = html.escape(text, quote=False)
    for char in "\\`*_[]|":
        text = text.replace(char, "\\" + char)
    return text


def expanded_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The action's help with argparse's %(default)s-style fields filled in."""
    if not action.help:
        return ""
    fields: dict[str, Any] = {**vars(action), "prog": parser.prog}
    fields = {k: (v.__name__ if callable(v) and hasattr(v, "__name__") else v)
              for k, v in fields.items()}
    if action.choices is not None:
        fields["choices"] = ", ".join(map(str, action.choices))
    return action.help % fields if "%" in action.help else action.help


def argument_line(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """One Markdown list item: the argument as typed, then what it means."""
    if action.option_strings:
        names = ", ".join(action.option_strings)
        value = ""
        if action.nargs != 0:  # a flag takes no value
            metavar = action.metavar or (
                "{" + ",".join(map(str, action.choices)) + "}" if action.choices is not None
                else action.dest.upper())
            value = " " + (metavar if isinstance(metavar, str) else " ".join(metavar))
        shown = f"`{names}{value}`"
    else:
        metavar = action.metavar or action.dest
        shown = f"`{metavar if isinstance(metavar, str) else ' '.join(metavar)}`"
    facts: list[str] = []
    if not action.option_strings:
        facts.append("optional positional" if action.nargs in ("?", "*") else "positional")
        if action.nargs == "*":
            facts.append("any number")
    elif action.required:
        facts.append("required")
    if action.choices is not None and (action.metavar or not action.option_strings):
        facts.append("one of " + ", ".join(f"`{choice}`" for choice in action.choices))
    if isinstance(action, argparse._AppendAction):
        facts.append("repeatable")
    if action.option_strings and action.nargs != 0 and action.default not in (None, [], ""):
        facts.append(f"default `{action.default}`")
    described = escape(expanded_help(parser, action))
    facts_text = f" ({'; '.join(facts)})" if facts else ""
    return f"- {shown}{facts_text}" + (f": {described}" if described else "")


def command_section(summary: str, parser: argparse.ArgumentParser) -> str:
    """The reference of one subcommand: heading, help line, usage block, arguments."""
    lines = [f"### {parser.prog}", ""]
    if summary:
        lines += [escape(summary[0].upper() + summary[1:]) + ".", ""]
    lines += ["```text", usage(parser), "```", ""]
    arguments = [action for action in parser._actions
                 if not isinstance(action, argparse._HelpAction)]
    lines += [argument_line(parser, action) for action in arguments]
    return "\n".join(lines).rstrip() + "\n"


def reference(parser: argparse.ArgumentParser) -> str:
    """The whole reference: the top-level usage, then every subcommand."""
    parts = ["```text", usage(parser), "```", ""]
    own = [action for action in parser._actions
           if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)]
    parts += [argument_line(parser, action) for action in own] + [""]
    for _name, summary, sub in subcommands(parser):
        parts.append(command_section(summary, sub))
    return "\n".join(parts)


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Fill the command line page's marker with the reference; other pages pass unchanged."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"docs/{PAGE} has no {MARKER} line for the generated reference")
    return markdown.replace(MARKER, reference(load_parser()))

"""Job templates (``sbatch_templates/*.sbatch``): batch scripts with ``{{VARIABLES}}``.

A template declares itself in its first comment lines:

    # synergy-template: One line saying what the job does
    # synergy-var: DATA               Folder of *.jpg training images    (no default: required)
    # synergy-var: STEPS=1000         Total training steps               (default 1000)

``{{NAME}}`` anywhere in the script is replaced by the variable's value. Built-ins:
``{{TEMPLATE_DIR}}`` (the templates' folder, for programs shipped beside them) and
``{{SYNERGY_PYTHON}}`` (the Python that runs synergy-sbatch); defaults may use them. A
variable whose default is a whole number takes only whole numbers.
Values are checked before anything is rendered: a template cannot be made into a
different shell script by a value (no quotes, ``$``, backticks, newlines, ...).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import BadInputError
from .shipped import shipped_paths

SUFFIX = ".sbatch"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
VAR_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,31}$")
VALUE_RE = re.compile(r"^[A-Za-z0-9_./:,=@+%\-]{0,512}$")   # no spaces: #SBATCH lines split on them
PLACEHOLDER = re.compile(r"\{\{([A-Za-z0-9_]+)\}\}")
DECL = re.compile(r"^#\s*synergy-var:\s*([A-Za-z0-9_]+)(?:=(\S*))?\s*(.*)$")
TITLE = re.compile(r"^#\s*synergy-template:\s*(.+)$")
BUILTINS = ("TEMPLATE_DIR", "SYNERGY_PYTHON")


class TemplateError(BadInputError):
    """Unknown template, missing or bad variable, or a malformed template file."""


@dataclass(frozen=True)
class Variable:
    name: str
    default: str | None          # None: required
    help: str


@dataclass(frozen=True)
class Template:
    name: str
    path: Path
    title: str
    variables: tuple[Variable, ...]
    text: str

    def render(self, values: dict[str, str]) -> str:
        """The script with every placeholder replaced; TemplateError for unknown,
        missing or unsafe values."""
        declared = {v.name: v for v in self.variables}
        unknown = sorted(set(values) - set(declared))
        if unknown:
            raise TemplateError(f"template {self.name!r} has no variable "
                                f"{', '.join(unknown)} (it has: {', '.join(declared)})")
        builtins = {"TEMPLATE_DIR": str(self.path.parent.resolve()),
                    "SYNERGY_PYTHON": sys.executable}
        final: dict[str, str] = dict(builtins)
        missing = []
        for v in self.variables:
            if v.name in values:
                value = values[v.name]
            elif v.default is not None:
                value = PLACEHOLDER.sub(lambda m: builtins.get(m.group(1), m.group(0)),
                                        v.default)
            else:
                missing.append(v.name)
                continue
            if v.default is not None and v.default.isdigit() and not value.isdigit():
                raise TemplateError(f"{v.name}={value!r}: expected a whole number "
                                    f"(like its default, {v.default})")
            if not VALUE_RE.match(value):
                raise TemplateError(f"{v.name}={value!r}: use letters, digits and "
                                    "_ . / : , = @ + % - only (at most 512)")
            final[v.name] = value
        if missing:
            raise TemplateError(f"template {self.name!r} needs "
                                + ", ".join(f"--var {m}=..." for m in missing))
        return PLACEHOLDER.sub(lambda m: final[m.group(1)], self.text)


def parse_template(path: Path) -> Template:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplateError(f"{path}: cannot read: {exc}") from None
    title, variables = "", []
    for line in text.splitlines():
        if (m := TITLE.match(line)) is not None:
            title = m.group(1).strip()
        elif (m := DECL.match(line)) is not None:
            name = m.group(1)
            if not VAR_RE.match(name) or name in BUILTINS:
                raise TemplateError(f"{path}: bad variable name {name!r}")
            variables.append(Variable(name, m.group(2), m.group(3).strip()))
    declared = {v.name for v in variables} | set(BUILTINS)
    used = set(PLACEHOLDER.findall(text))
    if used - declared:
        raise TemplateError(f"{path}: undeclared {', '.join(sorted(used - declared))}")
    return Template(path.name[:-len(SUFFIX)], path, title, tuple(variables), text)


def template_dirs(extra: str | Path | None = None) -> list[Path]:
    """Where templates are looked for, first match wins: ``extra`` (--template-dir or
    $SYNERGY_TEMPLATES), the source tree's sbatch_templates/, the installed copy."""
    dirs = [Path(extra)] if extra else []
    dirs += shipped_paths("sbatch_templates")
    return [d for d in dirs if d.is_dir()]


def available(extra: str | Path | None = None) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for d in template_dirs(extra):
        for p in sorted(d.glob(f"*{SUFFIX}")):
            found.setdefault(p.name[:-len(SUFFIX)], p)
    return found


def find(name: str, extra: str | Path | None = None) -> Template:
    if not NAME_RE.match(name):
        raise TemplateError(f"bad template name {name!r}")
    found = available(extra)
    if name not in found:
        raise TemplateError(f"no template {name!r} (have: {', '.join(found) or 'none'}; "
                            "synergy-sbatch --list-templates)")
    return parse_template(found[name])


def parse_vars(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not VAR_RE.match(name):
            raise TemplateError(f"--var {item!r}: expected NAME=VALUE with NAME in "
                                "capitals (e.g. --var STEPS=500)")
        if name in out:
            raise TemplateError(f"--var {name} given twice")
        out[name] = value
    return out

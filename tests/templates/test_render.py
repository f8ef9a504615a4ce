"""Job templates: discovery, rendering, and synergy-sbatch's template errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from synergy_slurm.cli.sbatch_cmd import main
from synergy_slurm.hook.sbatch_args import script_directives
from synergy_slurm.templates import TemplateError, available, find, parse_template, parse_vars

TEMPLATES = Path(__file__).resolve().parents[2] / "sbatch_templates"


def test_shipped_templates_parse_and_render_with_builtins():
    found = available()
    assert {"pytorch-single", "pytorch-torchrun"} <= set(found)
    t = find("pytorch-single")
    assert [v.name for v in t.variables if v.default is None] == ["DATA"]
    text = t.render({"DATA": "/data/imgs", "STEPS": "500"})
    assert "{{" not in text
    assert f'"{sys.executable}" "{TEMPLATES}/train_pytorch.py" --data "/data/imgs"' in text
    assert "--steps 500 " in text and "#SBATCH --gpus=1" in text
    assert script_directives(text)[:3] == ["--job-name=pytorch-train", "--nodes=1", "--gpus=1"]
    ddp = find("pytorch-torchrun").render({"DATA": "/d", "NODES": "3"})
    assert "#SBATCH --nodes=3" in ddp and "torch.distributed.run" in ddp


@pytest.mark.parametrize("values, message", [
    ({}, "needs --var DATA=..."),
    ({"DATA": "/d", "NOPE": "1"}, "has no variable NOPE"),
    ({"DATA": "/d; rm -rf ~"}, "use letters, digits"),
    ({"DATA": "$(id)"}, "use letters, digits"),
    ({"DATA": "/d\n#SBATCH --uid=0"}, "use letters, digits"),
    ({"DATA": "/d", "NAME": "a --uid=0"}, "use letters, digits"),
    ({"DATA": "/d", "STEPS": "12x"}, "expected a whole number"),
])
def test_bad_values_are_refused_before_rendering(values, message):
    with pytest.raises(TemplateError, match=message.replace("$", r"\$")):
        find("pytorch-single").render(values)


def test_malformed_templates_and_vars(tmp_path):
    bad = tmp_path / "bad.sbatch"
    bad.write_text("#!/bin/sh\n# synergy-var: A=1 x\necho {{B}}\n")
    with pytest.raises(TemplateError, match="undeclared B"):
        parse_template(bad)
    with pytest.raises(TemplateError, match="no template 'missing'"):
        find("missing")
    with pytest.raises(TemplateError, match="bad template name"):
        find("../etc/passwd")
    with pytest.raises(TemplateError, match="NAME=VALUE"):
        parse_vars(["steps=3"])
    with pytest.raises(TemplateError, match="given twice"):
        parse_vars(["A=1", "A=2"])
    assert parse_vars(["A=x=y", "B="]) == {"A": "x=y", "B": ""}


def test_template_dir_first(tmp_path):
    (tmp_path / "pytorch-single.sbatch").write_text(
        "#!/bin/sh\n# synergy-template: mine\n# synergy-var: X=1 x\necho {{X}}\n")
    assert find("pytorch-single", tmp_path).title == "mine"
    res = CliRunner().invoke(main, ["--template-dir", str(tmp_path), "--list-templates"])
    assert res.exit_code == 0 and "pytorch-single: mine" in res.output
    assert "pytorch-torchrun:" in res.output     # the shipped ones are still listed


@pytest.mark.parametrize("args, message", [
    (["--template", "nope"], "no template 'nope'"),
    (["--template", "pytorch-single"], "needs --var DATA"),
    (["--template", "pytorch-single", "--var", "DATA=/d", "--var", "BATCH=big"],
     "expected a whole number"),
    (["--var", "DATA=/d", "job.sh"], "--var needs --template"),
    (["--template", "pytorch-single", "--var", "DATA=/d", "--var", "oops"], "NAME=VALUE"),
])
def test_sbatch_template_errors_submit_nothing(args, message, monkeypatch, tmp_path):
    calls = tmp_path / "calls"
    fake = tmp_path / "sbatch"
    fake.write_text(f"#!/bin/sh\necho called >> {calls}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2 and message in res.output
    assert not calls.exists()


def test_template_and_a_script_conflict(tmp_path, monkeypatch):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    res = CliRunner().invoke(main, ["--template", "pytorch-single", "--var", "DATA=/d",
                                    "-o", "/dev/null", str(script)])
    assert res.exit_code == 2 and "either --template or a script" in res.output


def test_dry_run_prints_the_command_and_the_rendered_script():
    res = CliRunner().invoke(main, ["--dry-run", "--profile-key", "res18", "--requeue-ok",
                                    "--template", "pytorch-single", "--var", "DATA=/d",
                                    "--gpus=2"])
    assert res.exit_code == 0, res.output
    first, rest = res.output.split("\n", 1)
    assert first.endswith("--gpus=2 < (template pytorch-single)")
    assert "synergy:profile=res18 synergy:requeue-ok" in first
    assert rest.startswith("#!/bin/bash") and '--data "/d"' in rest

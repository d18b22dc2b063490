"""The Snakemake profiles (workflow/profiles/*) and the SLURM scripts beside them: static checks, no cluster needed.

The SLURM run itself is `make slurm-test` (workflow/profiles/slurm/slurm-test.sh); these tests guard the settings
whose loss would make that run hang or fail: the `squeue` status command (without slurmdbd the plugin's default
`sacct` fails on every poll and Snakemake waits forever), the short first status check, a MinJobAge long enough for
`squeue` to still see finished jobs, the partition the profile asks for, and per-rule overrides that name real rules.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Callable

import pytest
import yaml

from sources import REPO
PROFILES = REPO / "workflow" / "profiles"
SLURM = PROFILES / "slurm"
SCRIPTS = ["slurm-up.sh", "slurm-down.sh", "slurm-test.sh"]
# sbatch options the plugin (2.8.0) sets itself and refuses inside `slurm_extra` (a WorkflowError at submission).
PLUGIN_OWNED_SBATCH_OPTIONS = re.compile(
    r"(--(job-name|output|error|parsable|export|comment|workdir|account|partition|mem|mem-per-cpu|ntasks"
    r"|ntasks-per-gpu|cpus-per-task|cpus-per-gpu|time|constraint|qos|nodes|clusters|gres|gpus)\b)"
    r"|(^|[\s'\"])-(J|o|e|D|A|p|n|c|t|C|N)\b"
)


def load_profile(name: str) -> dict:
    with open(PROFILES / name / "config.yaml") as handle:
        profile = yaml.safe_load(handle)
    assert isinstance(profile, dict), f"workflow/profiles/{name}/config.yaml is not a mapping"
    return profile


def workflow_rule_names() -> set[str]:
    """Every `rule NAME:` and `checkpoint NAME:` in the Snakefile and workflow/rules/*.smk."""
    pattern = re.compile(r"^(?:rule|checkpoint)\s+([A-Za-z_][A-Za-z0-9_]*)\s*:", re.MULTILINE)
    names: set[str] = set()
    for path in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]:
        names |= set(pattern.findall(path.read_text()))
    return names


def commented_set_resources(text: str) -> dict:
    """The commented `# set-resources:` example of a profile, parsed as YAML ({} when the profile has none)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.rstrip() == "# set-resources:"), None)
    if start is None:
        return {}
    block = ["set-resources:"]
    for line in lines[start + 1 :]:
        if not line.startswith("#   "):
            break
        block.append(line[2:])
    return yaml.safe_load("\n".join(block))["set-resources"] or {}


def slurm_conf_settings() -> dict[str, str]:
    """KEY=VALUE lines of the slurm.conf that slurm-up.sh writes (its heredoc), first word of each line."""
    text = (SLURM / "slurm-up.sh").read_text()
    body = text.split("<<EOF", 1)[1].split("\nEOF", 1)[0]
    settings = {}
    for line in body.splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        key, value = line.split(None, 1)[0].split("=", 1)
        settings[key] = value
        settings[f"{key}:line"] = line
    return settings


@pytest.mark.parametrize("name", sorted(p.parent.name for p in PROFILES.glob("*/config.yaml")))
def test_profile_parses_and_names_known_options(name):
    profile = load_profile(name)
    # Profile keys are snakemake's long options without the dashes; a typo would be an error at run time.
    assert all(re.fullmatch(r"[a-z][a-z0-9-]*", key) for key in profile), sorted(profile)
    resources = profile.get("default-resources", {})
    assert isinstance(resources, dict)
    assert isinstance(resources.get("mem_mb"), int) and resources["mem_mb"] > 0
    assert isinstance(resources.get("runtime"), int) and resources["runtime"] > 0


@pytest.fixture(scope="module")
def snakemake_options() -> set[str]:
    """Snakemake's long options without dashes, the executor plugins' included (about 2 s to import)."""
    from snakemake.cli import get_argument_parser

    parser = get_argument_parser()
    return {o[2:] for action in parser._actions for o in action.option_strings if o.startswith("--")}


@pytest.mark.parametrize("name", sorted(p.parent.name for p in PROFILES.glob("*/config.yaml")))
def test_profile_keys_are_snakemake_options(name, snakemake_options):
    keys = set(load_profile(name))
    plugin_keys = {k for k in keys if k.startswith("slurm-")}
    if plugin_keys and "slurm-status-command" not in snakemake_options:
        pytest.skip("snakemake-executor-plugin-slurm is not installed (make slurm-test installs it)")
    assert keys <= snakemake_options, sorted(keys - snakemake_options)


def test_both_profiles_exist():
    assert {"local", "slurm"} <= {p.parent.name for p in PROFILES.glob("*/config.yaml")}


def test_slurm_profile_avoids_the_sacct_hang():
    profile = load_profile("slurm")
    assert profile["executor"] == "slurm"
    # Without slurmdbd, `sacct` fails on every poll and Snakemake never sees the jobs finish.
    assert profile["slurm-status-command"] == "squeue"
    init = profile["slurm-init-seconds-before-status-checks"]
    assert isinstance(init, int) and init == 5
    assert isinstance(profile["jobs"], int) and profile["jobs"] >= 2
    assert isinstance(profile["latency-wait"], int) and profile["latency-wait"] >= 5


def test_slurm_conf_keeps_finished_jobs_long_enough_for_squeue():
    conf = slurm_conf_settings()
    min_job_age = int(conf["MinJobAge"])
    init = load_profile("slurm")["slurm-init-seconds-before-status-checks"]
    # The plugin switches back to sacct when MinJobAge < 3 x init seconds, and its polls back off up to 180 s:
    # a job forgotten by slurmctld before it is polled stays "running" forever.
    assert min_job_age >= 3 * init
    assert min_job_age >= 10 * 180
    assert conf["AccountingStorageType"] == "accounting_storage/none"
    assert conf["ProctrackType"] == "proctrack/linuxproc" and conf["TaskPlugin"] == "task/none"
    # Without a default, an sbatch without --mem takes the whole node's memory and jobs run one at a time.
    assert int(conf["DefMemPerCPU"]) > 0


def test_slurm_profile_partition_is_the_one_slurm_up_creates():
    conf = slurm_conf_settings()
    partition = load_profile("slurm")["default-resources"]["slurm_partition"]
    assert conf["PartitionName"] == partition == "debug"
    assert "Default=YES" in conf["PartitionName:line"]


def test_workflow_rule_names_are_found():
    names = workflow_rule_names()
    # The parser must see the rules the profile may override; `extract` is the GPU example's target.
    assert {"all", "extract", "manifest"} <= names


def test_set_resources_name_existing_rules_and_leave_plugin_options_alone():
    text = (SLURM / "config.yaml").read_text()
    profile = load_profile("slurm")
    active = profile.get("set-resources") or {}
    example = commented_set_resources(text)
    # The GPU example for `extract` is documented in the profile (commented out: this machine has no GPU).
    assert "extract" in example, "the commented set-resources example for `extract` is missing or unparsable"
    assert example["extract"].get("gpu") == 1 or "gpu" in str(example["extract"].get("gres", ""))
    names = workflow_rule_names()
    for source, overrides in (("set-resources", active), ("commented set-resources", example)):
        assert isinstance(overrides, dict)
        for rule, resources in overrides.items():
            assert rule in names, f"{source} in workflow/profiles/slurm/config.yaml names no rule: {rule}"
            assert isinstance(resources, dict) and resources, f"{source}: {rule} sets nothing"
            extra = str(resources.get("slurm_extra", ""))
            assert not PLUGIN_OWNED_SBATCH_OPTIONS.search(extra), f"{source}: {rule}: slurm_extra {extra!r}"


def test_plugin_owned_options_pattern_catches_gres():
    # The guard above must be able to fail.
    assert PLUGIN_OWNED_SBATCH_OPTIONS.search("'--gres=gpu:1'")
    assert PLUGIN_OWNED_SBATCH_OPTIONS.search("'-p gpu'")
    assert not PLUGIN_OWNED_SBATCH_OPTIONS.search("'--mail-type=FAIL'")


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_is_valid_bash(script):
    path = SLURM / script
    text = path.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_stop_processes_by_pid_only(script):
    text = (SLURM / script).read_text()
    assert not re.search(r"\b(pkill|killall)\b", text)


@pytest.mark.parametrize("script", ["slurm-up.sh", "slurm-down.sh", "slurm-test.sh"])
def test_scripts_insist_on_root(script):
    assert re.search(r'\[ "\$\(id -u\)" -eq 0 \]', (SLURM / script).read_text())


def test_slurm_test_runs_under_a_kill_timeout_with_the_profile():
    text = (SLURM / "slurm-test.sh").read_text()
    assert "timeout -k 30" in text  # a hung run ignores SIGTERM
    assert "--profile workflow/profiles/slurm" in text
    assert "snakemake-executor-plugin-slurm==2.8.0" in text
    assert "trap cleanup EXIT" in text


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
@pytest.mark.parametrize("script", SCRIPTS)
def test_shellcheck(script):
    result = subprocess.run(["shellcheck", "-S", "warning", str(SLURM / script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def slurm_test_function(name: str) -> str:
    """The text of one bash function of slurm-test.sh, from `name() {` to its closing `}`."""
    text = (SLURM / "slurm-test.sh").read_text()
    match = re.search(rf"^{name}\(\) {{.*?^}}$", text, flags=re.S | re.M)
    assert match, name
    return match.group(0)


def written_test_config(tmp_path: Path, checkpoints: str) -> tuple[Callable[[str], subprocess.CompletedProcess], Path]:
    """slurm-test.sh's write_test_config run on the shipped config.yaml with SLURM_TEST_CHECKPOINTS=`checkpoints`,
    the file checked valid by the schema and the experiment's own checks; returns a runner of bash commands with
    its functions defined, and the file."""
    import sys

    from evaluate.experiment import Experiment, load_config

    functions = slurm_test_function("write_test_config") + "\n" + slurm_test_function("check_experiment")
    experiment = tmp_path / "experiment.yaml"
    env = {"VENV": str(Path(sys.executable).parent.parent), "CHECKPOINTS": checkpoints, "REPO": str(REPO)}

    def bash(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", f"set -euo pipefail\n{functions}\n{command}"], capture_output=True,
                              text=True, env={**os.environ, **env}, check=False)

    done = bash(f'write_test_config "{REPO / "config.yaml"}" "{experiment}"')
    assert done.returncode == 0, done.stderr
    Experiment(load_config(yaml.safe_load(experiment.read_text())))
    return bash, experiment


def test_slurm_test_names_its_experiment_with_a_config_file_on_both_runs():
    """Both runs, and the dry run after the SLURM one, get the experiment file; each run is checked against it."""
    text = (SLURM / "slurm-test.sh").read_text()
    assert len(re.findall(r'--configfile "\$EXPERIMENT"', text)) == 3
    assert len(re.findall(r'^check_experiment "\$SCRATCH/repo" "\$EXPERIMENT"', text, flags=re.M)) == 2


def test_slurm_test_s_experiment_file_is_valid_renames_every_data_set_and_is_checked(tmp_path):
    """The file slurm-test.sh writes from config.yaml: valid, every data set renamed (so a job that merged
    config.yaml back in would see the demo's names), and its check_experiment refuses outputs of other names."""
    bash, experiment = written_test_config(tmp_path, "dino-demo")
    shipped, config = yaml.safe_load((REPO / "config.yaml").read_text()), yaml.safe_load(experiment.read_text())
    assert list(config["checkpoints"]) == ["dino-demo"] and config["attention"] is False
    assert config["videos"] == config["discovery"] == config["saliency"] == {}
    kept = ("datasets", "segmentation", "semseg")  # the sections the short SLURM run keeps
    for section in kept:
        assert shipped[section] and list(config[section]) == [f"slurm-{name}" for name in shipped[section]], section
    for name, entry in config["datasets"].items():
        assert f"/{name}/" in entry["images"] and f"/{name}/" in entry["annotations"]
    # a finished run of that file passes its check; one that drew a data set of config.yaml's does not
    run = tmp_path / "run"
    for section in kept:
        for name in config[section]:
            (run / "results" / "demo" / section / name).mkdir(parents=True)
    others = [f"dino-demo,{name},eval\n" for section in kept[1:] for name in config[section]]
    (run / "results" / "ledger").mkdir(parents=True)
    scored = "checkpoint,dataset,role\ndino-demo,slurm-demo-val,eval\ndino-demo,slurm-demo-select,select\n"
    (run / "results" / "ledger" / "scores.csv").write_text(scored + "".join(others))
    assert bash(f'check_experiment "{run}" "{experiment}"').returncode == 0
    (run / "results" / "demo" / "datasets" / "demo-val").mkdir()
    refused = bash(f'check_experiment "{run}" "{experiment}"')
    assert refused.returncode == 1 and "data sets drawn" in refused.stderr, refused.stderr
    # a run that scored a set of another section that the file does not name (stop 31's SLURM run scored the
    # shipped demo-ecssd and demo-voc) is refused too
    (run / "results" / "demo" / "datasets" / "demo-val").rmdir()
    with open(run / "results" / "ledger" / "scores.csv", "a") as handle:
        handle.write("dino-demo,demo-ecssd,eval\n")
    refused = bash(f'check_experiment "{run}" "{experiment}"')
    assert refused.returncode == 1 and "scores.csv scores the data sets" in refused.stderr, refused.stderr


def test_slurm_test_s_whole_experiment_renames_the_sets_of_every_section(tmp_path):
    """SLURM_TEST_CHECKPOINTS=all keeps the sets of every section: each is renamed with its folders,
    and check_experiment counts them among the file's sets, drawn and scored."""
    bash, experiment = written_test_config(tmp_path, "all")
    shipped, config = yaml.safe_load((REPO / "config.yaml").read_text()), yaml.safe_load(experiment.read_text())
    run = tmp_path / "run"
    rows = ["checkpoint,dataset,role"]
    from evaluate.datasets.kinds import SECTIONS

    assert set(SECTIONS) == {"datasets", "videos", "discovery", "saliency", "segmentation", "semseg"}
    for section in SECTIONS:  # each drawn into results/demo/<section>/
        assert shipped[section], section  # the shipped demo has a set in every section
        assert list(config[section]) == [f"slurm-{name}" for name in shipped[section]], section
        for name, entry in config[section].items():
            old = name.removeprefix("slurm-")
            for key, value in entry.items():
                if isinstance(value, str) and f"/{old}" in shipped[section][old][key]:
                    assert value == shipped[section][old][key].replace(f"/{old}", f"/{name}"), (name, key)
            (run / "results" / "demo" / section / name).mkdir(parents=True)
            rows += [f"{checkpoint},{name},eval" for checkpoint in config["checkpoints"]]
    (run / "results" / "ledger").mkdir(parents=True)
    (run / "results" / "ledger" / "scores.csv").write_text("\n".join(rows) + "\n")
    passed = bash(f'check_experiment "{run}" "{experiment}"')
    assert passed.returncode == 0, passed.stderr
    (run / "results" / "demo" / "saliency" / "demo-ecssd").mkdir()
    refused = bash(f'check_experiment "{run}" "{experiment}"')
    assert refused.returncode == 1 and "data sets drawn" in refused.stderr, refused.stderr

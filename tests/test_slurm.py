"""The SLURM profiles, and the smoke workflow through a real one-node SLURM cluster (tests/slurm/cluster.sh).

The cluster test runs a subset of the smoke workflow (CW-POR up to its debates, ER-Audit up to the debate
candidates of QuALITY-H and V_base's evaluation on both datasets: 11 jobs, 5 of them model-bound, at most
three deep, so that the run's length is a few job start-ups rather than CW-POR's whole chain) with
`snakemake --workflow-profile` and a profile derived from profiles/slurm the way docs/cluster.md tells a site to,
then checks in SLURM's accounting where each job ran and what it held, and that every output equals the
local smoke run's (the session's smoke_run, shared with tests/test_workflow.py). A second, one-job run with
a site copy of profiles/slurm-cpu puts a model job on the cpu partition without a GPU.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest
import yaml
from smoke_workflow import BIN, REPO, project_copy, scratch_copy, snakemake

CLUSTER = REPO / "tests/slurm/cluster.sh"
ACCOUNT = "debate-audit-test"  # created by cluster.sh
NODE_GPUS = 2  # fake GPUs of the test node (cluster.sh)
SLURM_COMMANDS = ["munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd", "sbatch", "sacct", "sacctmgr"]
TARGETS = [
    "results/cwpor/smollm2-135m/responses_v20.parquet",
    "results/er_audit/debate/quality_h/w20/candidates_honest.parquet",
    "results/er_audit/debate/quality_h/w20/candidates_adversarial.parquet",
    "results/er_audit/verifier/smollm2-135m/quality_h/base/eval.parquet",
    "results/er_audit/verifier/smollm2-135m/gpqa_h/base/eval.parquet",
]
EXPECTED_JOBS = {
    "prepare_truthfulqa": 1,
    "prepare_quality_h": 1,
    "prepare_gpqa_h": 1,
    "cwpor_questions": 1,
    "debate_split": 2,
    "cwpor_debate": 1,
    "debate_generate": 2,
    "verifier_evaluate": 2,
}


def rules_declaring_gpu() -> set[str]:
    """Rules of the workflow whose resources include `gpu` (the model-bound rules)."""
    found, derived = set(), []
    for path in (REPO / "rules").glob("*.smk"):
        # rules may sit inside an if/else (rules/debate.smk), indented
        for block in re.split(r"^(?= *rule \w+:)", path.read_text(), flags=re.M):
            name = re.match(r" *rule (\w+):", block)
            resources = re.search(r"^( +)resources:\n((?:\1    .*\n)+)", block, flags=re.M)
            if name and resources and re.search(r"^ +gpu=", resources.group(2), flags=re.M):
                found.add(name.group(1))
        # `use rule a as b with:` keeps a's resources (rules/cwpor.smk: cwpor_judge_rebuttal)
        derived += re.findall(r"^ *use rule (\w+) as (\w+)", path.read_text(), flags=re.M)
    return found | {new for base, new in derived if base in found}


def load_profile(name: str) -> dict:
    return yaml.safe_load((REPO / "profiles" / name / "config.yaml").read_text())


def test_gpu_profile_sends_every_gpu_rule_to_the_gpu_partition():
    gpu_rules = rules_declaring_gpu()
    assert len(gpu_rules) >= 9, gpu_rules
    profile = load_profile("slurm")
    assert profile["executor"] == "slurm"
    assert "resources" not in profile  # no cap on concurrent GPU jobs: the scheduler's business
    # Jobs ask for their rule's threads; a fixed cpus_per_task would hand single-threaded jobs idle cores.
    assert "cpus_per_task" not in profile["default-resources"]
    assert profile["default-resources"]["slurm_partition"] == "cpu"
    on_gpu = {rule for rule, res in profile["set-resources"].items() if res.get("slurm_partition") == "gpu"}
    assert on_gpu == gpu_rules
    assert "prepare_model" not in on_gpu


def test_cpu_profile_asks_for_no_gpu():
    gpu_rules = rules_declaring_gpu()
    profile = load_profile("slurm-cpu")
    assert {rule for rule, res in profile["set-resources"].items() if res.get("gpu") == 0} == gpu_rules
    assert not any("slurm_partition" in res for res in profile["set-resources"].values())


def test_local_default_profile_still_caps_model_jobs():
    # Plain `snakemake` on a laptop: one model job at a time (make run raises it with --resources gpu=N).
    assert load_profile("default")["resources"] == ["gpu=1"]


class Resources(dict):
    """A job's resources as Snakemake prints them in a dry run, read as the plugin reads a job's."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def dry_run_jobs(workdir: Path, profile: str, configfiles: list[str]) -> list[SimpleNamespace]:
    """Every job of a from-scratch dry run with `profile` as the workflow profile: rule, wildcards, threads and
    resources as Snakemake evaluated them (the rules' functions, then the profile's set-resources)."""
    cmd = [str(BIN / "snakemake"), "-n", "--forceall", "--workflow-profile", profile, "--configfile", *configfiles]
    out = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=300, check=True).stdout
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", out):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        resources = re.search(r"^    resources: (.*)$", block, flags=re.M)
        if not rule or not resources:
            continue
        values = Resources()
        for item in resources.group(1).split(", "):
            key, _, value = item.partition("=")
            values[key] = int(value) if value.isdigit() else value
        threads = re.search(r"^    threads: (\d+)$", block, flags=re.M)
        wildcards = re.search(r"^    wildcards: (.*)$", block, flags=re.M)
        jobs.append(
            SimpleNamespace(
                name=rule.group(1),
                resources=values,
                threads=int(threads.group(1)) if threads else 1,
                wildcards=dict(w.split("=", 1) for w in wildcards.group(1).split(", ")) if wildcards else {},
            )
        )
    return jobs


def sbatch_command(job: SimpleNamespace) -> str:
    """The sbatch command snakemake-executor-plugin-slurm builds for `job` (its own get_submit_command, then
    the GPUs, as its run_job does)."""
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    params = {
        "run_uuid": "run",
        "slurm_logfile": "log",
        "comment_str": f"rule_{job.name}",
        "account": f"-A {ACCOUNT}",
        "partition": f"-p {job.resources['slurm_partition']}",
        "workdir": ".",
    }
    return get_submit_command(job, params) + set_gres_string(job)


@pytest.fixture(scope="module")
def paper_submissions(tmp_path_factory):
    """The paper overlay's jobs (and its rebuttal and cross-judge rounds, and an audit of models you bring: every
    GPU rule) under a site copy of each shipped profile."""
    workdir = project_copy(tmp_path_factory.mktemp("paper"))
    # the paper's epsilon is a percentile of V_org's maxima, which an audit of models you bring has not
    (workdir / "brought-epsilon.yaml").write_text("audited_models: {smollm2-instruction-tuning: {epsilon: 0.05}}\n")
    overlays = [
        "config/config.yaml",
        "config/paper.yaml",
        "config/rebuttal.yaml",
        "config/paper-cross-judge.yaml",
        "config/audit-models.yaml",  # audit_model_scores
        "brought-epsilon.yaml",
    ]
    return {
        shipped: dry_run_jobs(workdir, site_profile(workdir, shipped), overlays) for shipped in ("slurm", "slurm-cpu")
    }


def test_no_gpu_job_is_submitted_with_ntasks_per_gpu(paper_submissions):
    """SLURM 23.11 and later refuse a job step that inherits --cpus-per-task (SLURM_TRES_PER_TASK) beside
    --ntasks-per-gpu: "SLURM_TRES_PER_TASK is mutually exclusive with --ntasks-per-gpu" (the plugin's issues 342
    and 373). Every GPU job asks for its GPUs and cores with --gpus and --cpus-per-task only, and the job
    step's srun (the plugin's jobstep: the same get_cpu_setting) for its cores."""
    from snakemake_executor_plugin_slurm_jobstep import get_cpu_setting

    gpu_rules = rules_declaring_gpu()
    jobs = [job for job in paper_submissions["slurm"] if job.name in gpu_rules]
    assert {job.name for job in jobs} == gpu_rules
    for job in jobs:
        command = sbatch_command(job)
        assert "--ntasks-per-gpu" not in command and "--ntasks" not in command, command
        assert f"--gpus={job.resources['gpu']}" in command.split(), command
        cpus = f"--cpus-per-task={job.resources['cpus_per_task']}"
        assert cpus in command.split() and get_cpu_setting(job, True) == cpus, command
        assert f"-t {job.resources['runtime']}" in command, command


def test_gpu_jobs_ask_for_the_cores_vllm_and_in_process_work_need(paper_submissions):
    cores: dict[str, set[int]] = {}
    for job in paper_submissions["slurm"]:
        cores.setdefault(job.name, set()).add(job.resources.get("cpus_per_task"))
    # the Gemma-4-31B debater's engine over 4 GPUs: 2 + 4 processes, and the job's own
    assert cores["debate_generate"] == {7}
    # a one-GPU engine (3) or, where the job scores in-process, 4 per GPU (cluster.cpus.per_gpu)
    assert cores["cwpor_debate"] == cores["cwpor_rebuttal"] == cores["paraphrase_test"] == {4}
    assert cores["cwpor_judge"] == cores["audit_scores"] == cores["debate_select"] == {4}
    # fine-tuning: 4 per process over 4 (Llama-8B, Qwen-9B); 8 per process where the optimizer steps on the host
    # (GPT-20B, cpu_offload)
    assert cores["verifier_finetune"] == {16, 32}
    assert cores["prepare_model"] == {None}  # a CPU job: its threads (1)


def test_a_job_that_only_scores_with_a_vllm_model_asks_for_no_engine_copy(paper_submissions):
    """GPT-20B generates through vLLM in the paper overlay; evaluating and auditing it only score, in-process,
    and start no engine: 2 GB + 1.5 x its bf16 weights (41,820 MB before the download), where they asked for
    an engine's 3 GB and copy of the weights beside that (109,550 MB). The adjudicator generates through its
    engine and loads nothing in-process."""
    mem: dict[tuple[str, str | None], set[int]] = {}
    for job in paper_submissions["slurm"]:
        model = job.wildcards.get("architecture") or job.wildcards.get("adjudicator")
        mem.setdefault((job.name, model), set()).add(job.resources["mem_mb"])
    weights = 41_820
    assert mem[("verifier_evaluate", "gpt-oss-20b")] == mem[("audit_scores", "gpt-oss-20b")] == {2000 + 62_730}
    assert mem[("verifier_adjudicate", "gpt-oss-20b")] == {2000 + 3000 + weights}
    # GPT-20B is also the selector: selection and GCG only score with it
    assert mem[("debate_select", None)] == mem[("debate_gcg", None)] == {2000 + 62_730}


def test_cpu_profile_asks_for_each_model_job_s_threads(paper_submissions):
    gpu_rules = rules_declaring_gpu()
    for job in paper_submissions["slurm-cpu"]:
        if job.name in gpu_rules:
            command = sbatch_command(job)
            assert "--gpus" not in command and f"--cpus-per-task={job.threads}" in command.split(), command


def test_the_paper_overlay_gathers_each_cw_por_model_s_word_limits_into_one_job(paper_submissions):
    jobs = [job for job in paper_submissions["slurm"] if job.name in ("cwpor_debate", "cwpor_judge")]
    # 5 models; each judged by its own model and the 5 cross-judges of config/paper-cross-judge.yaml
    assert sum(job.name == "cwpor_debate" for job in jobs) == 5
    assert all("verbosity" not in job.wildcards for job in jobs)


def dry_run_resources(workdir: Path, *args: str, overlays: tuple[str, ...] = ()) -> dict[str, set[int]]:
    """mem_mb of every job of a dry run, by rule."""
    out = snakemake(workdir, "-n", *args, overlays=overlays, timeout=300)
    mem: dict[str, set[int]] = {}
    rule = None
    for line in (out.stdout + out.stderr).splitlines():
        if m := re.match(r"(?:local)?rule (\w+):", line.strip()):
            rule = m.group(1)
        elif (m := re.search(r"\bmem_mb=(\d+)", line)) and rule:
            mem.setdefault(rule, set()).add(int(m.group(1)))
    return mem


def test_model_job_memory_comes_from_the_model(tmp_path, embedded_model_dir):
    workdir = scratch_copy(tmp_path, embedded_model_dir)
    # Prepared model: parameters counted from its safetensors headers, float32 (dtype auto counts 4 bytes).
    mem = dry_run_resources(workdir)
    params = 134_515_008  # SmolLM2-135M
    inference = 2000 + -(-15 * params * 4 // 10**7)  # JOB_BASE_MB + ceil(1.5 x weights MB)
    # The smoke overlay trains the embedded model with LoRA: frozen weights only, as inference.
    # off in the default config: the rebuttal round (config/rebuttal.yaml), GCG (config/gcg.yaml) and the
    # audits of models you bring (config/audit-models.yaml)
    off = {"cwpor_rebuttal", "cwpor_judge_rebuttal", "debate_gcg", "audit_model_scores"}
    assert rules_declaring_gpu() - mem.keys() == off
    for rule in rules_declaring_gpu() & mem.keys():
        assert mem[rule] == {inference}, (rule, mem.get(rule))
    # Full-parameter training adds gradients and two AdamW moments: 4 x the weights.
    (workdir / "full.yaml").write_text("verifier: {lora: {enabled: false}}\n")
    mem = dry_run_resources(workdir, "--until", "verifier_finetune", overlays=("full.yaml",))
    assert mem["verifier_finetune"] == {2000 + -(-4 * params * 4 // 10**6)}
    # Not prepared yet: the size its model card gives (models.size.KNOWN_PARAMS_B, 14.77B), in its dtype
    # (x 2 bytes x 1.5 + 2 GB).
    (workdir / "big.yaml").write_text(
        "models: {big: {source: hf, id: Qwen/Qwen2.5-14B-Instruct, dtype: bfloat16}}\ncwpor: {models: [big]}\n"
    )
    mem = dry_run_resources(workdir, "--until", "cwpor_judge", overlays=("big.yaml",))
    assert mem["cwpor_debate"] == mem["cwpor_judge"] == {2000 + 44_310}


# ------------------------------------------------------------------ the smoke workflow through SLURM


def slurm_env(state: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["SLURM_CONF"] = str(state / "etc/slurm.conf")
    env["PATH"] = f"{env.get('PATH', '')}:/usr/sbin"
    return env


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """A one-node cluster (partitions cpu and gpu, 2 fake GPUs), stopped after the module, daemon by daemon."""
    if os.geteuid() != 0:
        pytest.skip("the test cluster runs its daemons as root (SlurmUser=root): run the test as root")
    path = f"{os.environ.get('PATH', '')}:/usr/sbin"
    missing = [cmd for cmd in SLURM_COMMANDS if shutil.which(cmd, path=path) is None]
    if missing:
        pytest.skip(f"SLURM packages not installed (missing {', '.join(missing)}): run tests/slurm/cluster.sh install")
    # .ci/run names the folder, so that it can stop the daemons even when pytest itself is killed.
    named = os.environ.get("DEBATE_AUDIT_SLURM_STATE")
    state = Path(named) if named else tmp_path_factory.mktemp("slurm")
    try:
        started = subprocess.run([str(CLUSTER), "start", str(state)], capture_output=True, text=True, timeout=240)
        if started.returncode != 0:
            pytest.skip(f"the test SLURM cluster did not start:\n{started.stdout[-2000:]}\n{started.stderr[-3000:]}")
        yield state
    finally:
        subprocess.run([str(CLUSTER), "stop", str(state)], capture_output=True, text=True, timeout=120)


def site_profile(workdir: Path, shipped: str) -> str:
    """What docs/cluster.md tells a site to do: copy profiles/<shipped> and set the account (partitions: cpu, gpu)."""
    profile = load_profile(shipped)
    profile["default-resources"]["slurm_account"] = ACCOUNT
    # Test cluster only: react to finished jobs within seconds, fail at once, keep the plugin's job logs.
    profile.update(
        {
            "jobs": 10,
            "retries": 0,
            "latency-wait": 5,
            "slurm-init-seconds-before-status-checks": 2,
            "slurm-keep-successful-logs": True,
        }
    )
    site = workdir / f"profiles/site-{shipped}"
    site.mkdir(parents=True)
    (site / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    return f"profiles/site-{shipped}"


def sacct_jobs(state: Path) -> list[dict]:
    """Every job of the test cluster from SLURM's accounting: rule (from the plugin's job comment), partition,
    account, allocated TRES, start, end, state."""
    sacct = subprocess.run(
        [
            "sacct",
            "-X",
            "-n",
            "-P",
            "-a",
            "--starttime",
            "2000-01-01",
            "--format",
            "JobID,Partition,Account,AllocTRES,Start,End,State,Comment",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=slurm_env(state),
    ).stdout
    jobs = []
    for line in sacct.splitlines():
        job_id, partition, account, tres, start, end, state_, comment = line.split("|", 7)
        rule = re.match(r"rule_(\w+?)(?:_wildcards_|$)", comment)
        tres_map = dict(item.split("=", 1) for item in tres.split(",") if "=" in item)
        jobs.append(
            dict(
                id=job_id,
                rule=rule.group(1) if rule else comment,
                partition=partition,
                account=account,
                tres=tres_map,
                start=datetime.fromisoformat(start),
                end=datetime.fromisoformat(end),
                state=state_,
            )
        )
    return jobs


@pytest.fixture(scope="module")
def slurm_run(slurm_cluster, tmp_path_factory, embedded_model_dir):
    # A private copy of the model: the jobs run on the "cluster", away from the shared model directory.
    workdir = scratch_copy(tmp_path_factory.mktemp("slurm_workflow"), embedded_model_dir, copy_model=True)
    profile = site_profile(workdir, "slurm")
    result = snakemake(
        workdir, "--workflow-profile", profile, *TARGETS, local=False, env=slurm_env(slurm_cluster), timeout=1200
    )
    return workdir, result, sacct_jobs(slurm_cluster)


@pytest.mark.slow
def test_every_job_ran_on_slurm_under_the_site_account(slurm_run):
    _, result, jobs = slurm_run
    counts = {}
    for job in jobs:
        counts[job["rule"]] = counts.get(job["rule"], 0) + 1
    assert counts == EXPECTED_JOBS, result.stderr[-3000:]
    assert {job["state"] for job in jobs} == {"COMPLETED"}
    assert {job["account"] for job in jobs} == {ACCOUNT}
    # A model job holds the cores of its in-process work on a GPU (cluster.cpus.per_gpu), every other job the
    # one CPU its single-threaded rule uses.
    gpu_rules = rules_declaring_gpu()
    assert {job["tres"]["cpu"] for job in jobs if job["rule"] in gpu_rules} == {"4"}
    assert {job["tres"]["cpu"] for job in jobs if job["rule"] not in gpu_rules} == {"1"}


@pytest.mark.slow
def test_model_jobs_ran_on_the_gpu_partition_with_one_gpu_and_their_models_memory(slurm_run):
    _, _, jobs = slurm_run
    gpu_rules = rules_declaring_gpu()
    model_jobs = [job for job in jobs if job["rule"] in gpu_rules]
    assert len(model_jobs) == 5
    for job in model_jobs:
        assert job["partition"] == "gpu", job
        assert job["tres"].get("gres/gpu") == "1", job
        assert job["tres"]["mem"] == "2808M", job  # model_mem_mb of the prepared SmolLM2-135M
    for job in jobs:
        if job["rule"] not in gpu_rules:
            assert job["partition"] == "cpu", job
            assert "gres/gpu" not in job["tres"], job


@pytest.mark.slow
def test_model_jobs_ran_concurrently_up_to_the_gpus_of_the_node(slurm_run):
    _, _, jobs = slurm_run
    model_jobs = [job for job in jobs if job["partition"] == "gpu"]
    # Most model jobs running at one instant (sacct times have one-second resolution: touching ends and
    # starts do not overlap).
    events = sorted(
        [(job["start"], 1) for job in model_jobs] + [(job["end"], -1) for job in model_jobs],
        key=lambda event: (event[0], event[1]),
    )
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak == NODE_GPUS, [(job["rule"], job["start"], job["end"]) for job in model_jobs]


@pytest.mark.slow
def test_cpu_profile_runs_a_model_job_on_the_cpu_partition_without_a_gpu(slurm_run, slurm_cluster):
    workdir, _, before = slurm_run
    profile = site_profile(workdir, "slurm-cpu")
    target = "results/er_audit/verifier/smollm2-135m/gpqa_h/base/eval.parquet"
    # The target before --forcerun, which would take it as one more rule to force.
    snakemake(
        workdir,
        "--workflow-profile",
        profile,
        target,
        "--forcerun",
        "verifier_evaluate",
        local=False,
        env=slurm_env(slurm_cluster),
        timeout=600,
    )
    seen = {job["id"] for job in before}
    new = [job for job in sacct_jobs(slurm_cluster) if job["id"] not in seen]
    assert [(job["rule"], job["partition"], job["state"]) for job in new] == [("verifier_evaluate", "cpu", "COMPLETED")]
    assert "gres/gpu" not in new[0]["tres"] and new[0]["tres"]["cpu"] == "1", new[0]
    # Its output is compared with the local run's below, like every other output.


@pytest.mark.slow
def test_slurm_outputs_equal_the_local_run(slurm_run, smoke_run):
    workdir, _, _ = slurm_run
    local, _ = smoke_run
    found = [*workdir.glob("results/**/*.parquet"), *workdir.glob("data/*.parquet")]
    # The call cache is not an output: its rows carry when and how long each call ran.
    outputs = sorted(p.relative_to(workdir) for p in found if "cache" not in p.relative_to(workdir).parts)
    assert len(outputs) >= 14, outputs
    for path in outputs:
        ours, theirs = pl.read_parquet(workdir / path), pl.read_parquet(local / path)
        assert ours.equals(theirs), f"{path} differs between the SLURM and the local run"

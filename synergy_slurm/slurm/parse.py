"""Parsing Slurm's output: ``squeue --json`` / ``sinfo --json`` (22.05's OpenAPI v0.0.38 and
the newer shape where numbers are ``{"set", "infinite", "number"}`` objects and states are
lists), ``scontrol show partition -o`` text, TRES strings and host lists.

Every record is parsed on its own: a malformed job or node becomes a :class:`Skipped` with
the reason, never an exception out of this module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..errors import BadInputError
from .model import NodeAlloc, Skipped, SlurmJob, SlurmNode, SlurmPartition
from .release import Release
from .units import size_mb, tres_items

T = TypeVar("T")


class ParseError(BadInputError):
    """A whole document that cannot be read (not JSON, not an object, no list of records)."""


# -- primitives --------------------------------------------------------------------------
def num(value: Any, default: int | None = None) -> int | None:
    """An integer from 22.05's plain numbers or the newer wrapped ones; None/unset/infinite
    give ``default``. Anything else raises ValueError."""
    if value is None:
        return default
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return default
        return int(value)
    if isinstance(value, Mapping):
        if value.get("infinite") or value.get("set") is False:
            return default
        if "number" in value:
            return num(value["number"], default)
        raise ValueError(f"unknown number object {dict(value)!r}")
    if isinstance(value, str):
        if value.strip() == "":
            return default
        return int(value)
    raise ValueError(f"expected a number, got {type(value).__name__}")


def text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # newer Slurm: states as lists of flags
        return ",".join(str(v) for v in value)
    return str(value)


def _state_words(value: Any) -> list[str]:
    """A job state as its words: newer Slurm lists them (``["RUNNING", "RESIZING"]``),
    older joins them (``RUNNING``, ``RUNNING+RESIZING``, ``RUNNING,RESIZING``)."""
    words = [str(v) for v in value] if isinstance(value, list) else re.split(r"[,+]",
                                                                           text(value))
    return [w.upper() for w in words]


def first_state(value: Any) -> str:
    """The base state: 22.05 gives "PENDING", newer gives ["PENDING", "REQUEUED", ...]."""
    words = _state_words(value)
    return words[0] if words else ""


def accounting_state(value: Any) -> str:
    """A job record's state as sacct's text shows it: ``CANCELLED by 0`` -> CANCELLED,
    ``RUNNING,RESIZING`` -> RUNNING; 23.02+'s lists -> the base state, but an earlier run of
    a requeued job (``["PENDING", "REQUEUED"]``) -> REQUEUED, as the text form calls it."""
    if isinstance(value, list):
        words = _state_words(value)
        return "REQUEUED" if "REQUEUED" in words else (words[0] if words else "")
    words = text(value).split()
    return first_state(words[0]) if words else ""


def state_flags(value: Any) -> frozenset[str]:
    """The flags after the base state (RESIZING, REQUEUED, ...)."""
    return frozenset(w for w in _state_words(value)[1:] if w)


_GPU_TRES = re.compile(
    r"(?:^|,)\s*(?:gres[:/])?gpu(?::(?P<type>[A-Za-z0-9_.\-]+))?[:=](?P<count>\d+)\s*(?=,|$)")


def gpu_count(tres: str) -> tuple[int, str | None] | None:
    """GPUs in a TRES request: ``gres:gpu:2``, ``gres/gpu:2``, ``gpu:2``, typed
    ``gres:gpu:a100:2``, ``gres/gpu:a100=2``; several entries are summed. None if no GPU."""
    if not tres:
        return None
    total, gtype, found = 0, None, False
    for m in _GPU_TRES.finditer(tres):
        found = True
        total += int(m.group("count"))
        gtype = gtype or m.group("type")
    return (total, gtype) if found else None


def per_gpu_value(tres: str) -> int | None:
    """The per-GPU number in ``cpus_per_tres`` / ``memory_per_tres`` (``gres:gpu:3``,
    ``gpu:3``, ``gres/gpu:62500``, ``gres/gpu=3``)."""
    got = gpu_count(tres)
    return None if got is None else got[0]


def config_flags(show_config: str, name: str) -> frozenset[str]:
    """The comma-separated flags of one ``scontrol show config`` line (``PrologFlags     =
    Alloc,Contain`` -> {"Alloc", "Contain"}); empty when absent or ``(null)``."""
    for line in show_config.splitlines():
        key, eq, value = line.partition("=")
        if eq and key.strip() == name:
            value = value.strip()
            return frozenset() if value in ("", "(null)") else frozenset(
                v.strip() for v in value.split(",") if v.strip())
    return frozenset()


def detail_mem_mb(show_job_detail: str) -> int:
    """The memory a job holds on its node, from ``scontrol show job -d`` text (its node
    lines: ``Nodes=n1 CPU_IDs=0-8 Mem=62500 GRES=gpu:1(IDX:0)``, MB); 0 when not shown."""
    m = re.search(r"^\s+Nodes=\S+ CPU_IDs=\S+ Mem=(\d+)", show_job_detail, re.MULTILINE)
    return int(m.group(1)) if m else 0


def expand_hostlist(spec: str) -> list[str]:
    """``n[1-3,5],gpu-a[01-02]`` -> n1 n2 n3 n5 gpu-a01 gpu-a02 (Slurm's host list syntax)."""
    spec = spec.strip()
    if not spec or spec in ("(null)", "None"):
        return []
    out: list[str] = []
    for part in _split_top(spec):
        m = re.fullmatch(r"(?P<pre>[^\[\]]*)\[(?P<rng>[^\]]+)\](?P<post>.*)", part)
        if not m:
            if "[" in part or "]" in part:
                raise ValueError(f"bad host list {spec!r}")
            out.append(part)
            continue
        for item in m.group("rng").split(","):
            if "-" in item:
                lo, hi = item.split("-", 1)
                width = len(lo)
                if not (lo.isdigit() and hi.isdigit()) or int(hi) < int(lo):
                    raise ValueError(f"bad range {item!r} in {spec!r}")
                if int(hi) - int(lo) > 100_000:
                    raise ValueError(f"range too large in {spec!r}")
                out += [f"{m.group('pre')}{i:0{width}d}{m.group('post')}"
                        for i in range(int(lo), int(hi) + 1)]
            else:
                out.append(f"{m.group('pre')}{item}{m.group('post')}")
    return out


def _split_top(spec: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in spec:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in (s.strip() for s in parts) if p]


def load_document(raw: str | bytes | Mapping[str, Any], key: str) -> list[Any]:
    """The list under ``key`` of a JSON document from squeue/sinfo."""
    return _document(raw, key)[1]


def _document(raw: str | bytes | Mapping[str, Any], key: str) -> tuple[dict[str, Any], list[Any]]:
    """The document (the command's JSON text, or the same already as a dict: the pyslurm
    reader's) and its list of records under ``key``."""
    try:
        doc = raw if isinstance(raw, Mapping) else json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ParseError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ParseError("expected a JSON object")
    records = doc.get(key)
    if not isinstance(records, list):
        raise ParseError(f"no '{key}' list in the document")
    return doc, records


def obj(value: Any) -> Mapping[str, Any]:
    """A JSON record's object field as a mapping; empty when absent or of another type."""
    return value if isinstance(value, Mapping) else {}


def version_of(raw: str | bytes | Mapping[str, Any]) -> str:
    """The Slurm release a JSON document (or its text) says it came from; "" if none."""
    try:
        doc = raw if isinstance(raw, Mapping) else json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return ""
    try:
        ver = doc["meta"]["Slurm"]["version"]
        return f"{ver['major']}.{int(ver['minor']):02d}.{ver['micro']}"   # 22.05, not 22.5
    except (KeyError, TypeError, ValueError):
        try:
            return str(doc["meta"]["slurm"]["release"])
        except (KeyError, TypeError, ValueError):
            return ""


# -- jobs --------------------------------------------------------------------------------
def _each(records: list[Any], parse: Callable[[Any], T], what: str, ident: str
          ) -> tuple[list[T], list[Skipped]]:
    """Parse every record on its own; a bad one becomes a Skipped with the reason."""
    good: list[T] = []
    skipped: list[Skipped] = []
    for rec in records:
        try:
            good.append(parse(rec))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            name = rec.get(ident) if isinstance(rec, dict) else None
            skipped.append(Skipped(f"{what} {name}", f"{type(exc).__name__}: {exc}"))
    return good, skipped


def parse_jobs(raw: str | bytes | Mapping[str, Any]) -> tuple[list[SlurmJob], list[Skipped]]:
    doc, records = _document(raw, "jobs")
    try:
        blurred = Release.parse(version_of(doc)).blurs_request_memory
    except ValueError:          # no version in the document: take the request as shown
        blurred = False
    return _each(records, lambda rec: parse_job(rec, blurred), "job", "job_id")


def parse_job(rec: Mapping[str, Any], blurred_request_mem: bool = False) -> SlurmJob:
    if not isinstance(rec, Mapping):
        raise TypeError("job record is not an object")
    job_id = num(rec["job_id"])
    if job_id is None or job_id <= 0:
        raise ValueError("missing job_id")
    state = first_state(rec["job_state"])
    if not state:
        raise ValueError("missing job_state")
    asked = gpu_asks(lambda per: text(rec.get(f"tres_per_{per}")))
    num_nodes = num(rec.get("node_count"), 1) or 1
    num_tasks = num(rec.get("tasks")) if "tasks" in rec else None
    node_names = tuple(expand_hostlist(text(rec.get("nodes"))))
    gres_detail = rec.get("gres_detail") or []
    if not isinstance(gres_detail, list):
        raise TypeError("gres_detail is not a list")
    alloc_gpus = [_detail_gpus(text(g)) for g in gres_detail]
    gpus = _total_gpus(*asked, max(num_nodes, len(node_names) or 1), num_tasks, alloc_gpus,
                       state)
    req = tres_items(text(rec.get("tres_req_str")))
    cpus = num(rec.get("cpus"), None)
    if cpus is None:
        cpus = int(req.get("cpu", "0") or 0)
    priority = num(rec.get("priority"), 0) or 0
    reason = text(rec.get("state_reason"))
    array_id, task_id, array_pending, array_throttle = _array(rec, state)
    limit_min = num(rec.get("time_limit"), None)
    mem_per_gpu = per_gpu_value(text(rec.get("memory_per_tres")))
    return SlurmJob(
        job_id=job_id, user=text(rec.get("user_name")) or str(num(rec.get("user_id"), -1)),
        state=state, partition=text(rec.get("partition")), gpus=gpus,
        account=text(rec.get("account")), qos=text(rec.get("qos")),
        **gpu_request_fields(*asked), num_nodes=num_nodes, num_tasks=num_tasks, cpus=cpus,
        cpus_per_gpu=per_gpu_value(text(rec.get("cpus_per_tres"))),
        mem_per_gpu_mb=mem_per_gpu,
        mem_per_node_mb=_mem_per_node(rec, {} if blurred_request_mem else req, mem_per_gpu,
                                      gpus, num_nodes),
        mem_per_cpu_mb=num(rec.get("memory_per_cpu")), nodes=node_names,
        alloc=_allocations(rec, node_names, alloc_gpus),
        restarts=num(rec.get("restart_cnt"), 0) or 0,
        requeue=bool(rec.get("requeue", False)), batch=bool(rec.get("batch_flag", True)),
        held=priority == 0 and state == "PENDING" and "Held" in reason,
        priority=priority, reason=reason, comment=text(rec.get("comment")),
        admin_comment=text(rec.get("admin_comment")), name=text(rec.get("name")),
        submit_time=num(rec.get("submit_time"), 0) or 0,
        start_time=num(rec.get("start_time"), 0) or 0,
        array_job_id=array_id, array_task_id=task_id, array_pending_tasks=array_pending,
        array_throttle=array_throttle, het_job_id=num(rec.get("het_job_id"), 0) or None,
        time_limit_s=None if limit_min is None or limit_min <= 0 else limit_min * 60,
        eligible_time=num(rec.get("eligible_time"), 0) or 0,
        reservation=text(rec.get("resv_name")),
        resizing="RESIZING" in state_flags(rec["job_state"]),
    )


GpuAsk = tuple[int, str | None] | None


def gpu_asks(field: Callable[[str], str]) -> tuple[GpuAsk, GpuAsk, GpuAsk, GpuAsk]:
    """``gpu_count`` of a job's GPUs per job, node, task and socket; ``field("node")``
    reads the job's tres_per_node string, and so on."""
    return (gpu_count(field("job")), gpu_count(field("node")), gpu_count(field("task")),
            gpu_count(field("socket")))


def gpu_request_fields(per_job: GpuAsk, per_node: GpuAsk, per_task: GpuAsk,
                       per_socket: GpuAsk) -> dict[str, Any]:
    """A job's ``SlurmJob`` fields for how it asked for GPUs (``gpu_count`` of each of its
    tres_per_* strings), the same from every reader."""
    return {
        "gpus_per_job": per_job[0] if per_job else None,
        "gpus_per_node": per_node[0] if per_node else None,
        "gpus_per_task": per_task[0] if per_task else None,
        "gpus_per_socket": per_socket[0] if per_socket else None,
        "gpu_type": next((g[1] for g in (per_job, per_node, per_task, per_socket)
                          if g and g[1]), None),
    }


def _total_gpus(per_job: GpuAsk, per_node: GpuAsk, per_task: GpuAsk, per_socket: GpuAsk,
                nodes: int, num_tasks: int | None, alloc_gpus: list[int], state: str) -> int:
    """A job's GPUs: what it was given once it holds them, else what it asked for."""
    if sum(alloc_gpus) > 0 and state != "PENDING":
        return sum(alloc_gpus)
    return requested_gpus(per_job, per_node, per_task, per_socket, nodes, num_tasks)


def requested_gpus(per_job: GpuAsk, per_node: GpuAsk, per_task: GpuAsk, per_socket: GpuAsk,
                   nodes: int, num_tasks: int | None) -> int:
    """The GPUs a job asked for: per job, else per node times its nodes, else per task
    times its tasks, else per socket (one socket: the request alone does not say how
    many the job will span)."""
    if per_job:
        return per_job[0]
    if per_node:
        return per_node[0] * nodes
    if per_task:
        return per_task[0] * (num_tasks or 1)
    if per_socket:
        return per_socket[0]
    return 0


def _array(rec: Mapping[str, Any], state: str) -> tuple[int | None, int | None, int, int]:
    """An array job's id, this record's task id (None: the record of the tasks that have
    not started), how many tasks that record stands for, and the array's throttle."""
    array_id = num(rec.get("array_job_id"), 0) or None
    task_id = num(rec.get("array_task_id"), None)
    if task_id is not None and task_id >= NO_VAL:
        task_id = None          # 22.05 writes NO_VAL for the pending tasks' record
    array_string = text(rec.get("array_task_string"))
    pending = (count_array_tasks(array_string)
               if array_id and task_id is None and state == "PENDING" else 0)
    return (array_id, task_id, pending,
            max(num(rec.get("array_max_tasks"), 0) or 0, _throttle(array_string)))


NO_VAL = 0xFFFFFFFE
_ARRAY_ITEM = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


def count_array_tasks(spec: str) -> int:
    """How many tasks an array's task string names ("0-9", "1,3,5-7", "0-15:4", with
    an optional "%N" throttle): what its pending record stands for. At least 1 (the record
    itself) when the string is empty or unreadable."""
    body = spec.split("%", 1)[0].strip()
    total = 0
    for item in filter(None, body.split(",")):
        m = _ARRAY_ITEM.match(item.strip())
        if not m:
            return 1
        lo, hi, step = int(m[1]), int(m[2] or m[1]), int(m[3] or 1)
        if hi < lo or step < 1:
            return 1
        total += (hi - lo) // step + 1
    return max(total, 1)


def _throttle(spec: str) -> int:
    """The ``%N`` of an array task string, 0 where it has none."""
    _, _, tail = spec.partition("%")
    return int(tail) if tail.strip().isdigit() else 0


def _mem_per_node(rec: Mapping[str, Any], req: Mapping[str, str], mem_per_gpu: int | None,
                  gpus: int, num_nodes: int) -> int | None:
    """Memory per node when the job asked for it (``--mem``), else None.

    22.05 reports ``memory_per_node`` only for ``--mem``. From 23.02 it is always set and,
    beside memory per GPU, mirrors that per-GPU value; a ``--mem`` request then shows
    only in the requested (or, running, the allocated) TRES, whose memory differs from
    GPUs x memory per GPU. 24.11 requests show a node's whole memory for a job without
    --mem: there only the allocation tells, and a pending --mem job reads as asking for
    memory per GPU (docs/slurm-notes.md).
    """
    raw = rec.get("memory_per_node")
    value = num(raw)
    if not isinstance(raw, Mapping):
        return value
    if not value:
        return None
    if mem_per_gpu is None:
        return value
    # What the job holds, once it runs, is exact: 24.11 shows the node's whole memory as
    # the request of every job without --mem (26.05 GPUs x memory per GPU).
    held = tres_items(text(rec.get("tres_alloc_str"))).get("mem")
    asked = int(size_mb(held or req.get("mem", ""))) if held or req.get("mem") else 0
    if not asked or asked == mem_per_gpu * gpus:
        return None
    return asked // max(num_nodes, 1)


def _detail_gpus(detail: str) -> int:
    """``gpu:8(IDX:0-7)`` / ``gpu:a100:2(IDX:0-1)`` -> 8 / 2."""
    m = re.match(r"gpu(?::[A-Za-z0-9_.\-]+)?:(\d+)", detail)
    return int(m.group(1)) if m else 0


def _allocations(rec: Mapping[str, Any], names: tuple[str, ...],
                 gpus: list[int]) -> tuple[NodeAlloc, ...]:
    res = rec.get("job_resources")
    if not isinstance(res, Mapping):
        return ()
    nodes = res.get("allocated_nodes")
    if nodes is None and isinstance(res.get("nodes"), Mapping):  # 23.11+ layout
        nodes = res["nodes"].get("allocation")
    nodes = nodes or []
    if isinstance(nodes, Mapping):  # some versions key nodes by index
        nodes = list(nodes.values())
    out = []
    for i, node in enumerate(nodes):
        if not isinstance(node, Mapping):
            raise TypeError("allocated node is not an object")
        name = text(node.get("nodename") or node.get("name")) or (
            names[i] if i < len(names) else "")
        raw_cpus = node.get("cpus")
        if isinstance(raw_cpus, Mapping) and "count" in raw_cpus:  # 23.11+: {"count", "used"}
            raw_cpus = raw_cpus["count"]
        cpus = num(raw_cpus, None)
        if cpus is None:
            cpus = _count_cores(node.get("sockets"))
        mem = node.get("memory_allocated", node.get("memory"))
        if isinstance(mem, Mapping) and "allocated" in mem:
            mem = mem["allocated"]
        out.append(NodeAlloc(name, cpus, num(mem, 0) or 0, gpus[i] if i < len(gpus) else 0))
    return tuple(out)


def _count_cores(sockets: Any) -> int:
    if isinstance(sockets, Mapping):
        sockets = list(sockets.values())
    if not isinstance(sockets, list):
        return 0
    total = 0
    for sock in sockets:
        cores = sock.get("cores") if isinstance(sock, Mapping) else None
        if isinstance(cores, Mapping):
            total += sum(1 for v in cores.values() if "alloc" in text(v).lower())
        elif isinstance(cores, list):
            total += sum(1 for v in cores if "alloc" in json.dumps(v).lower())
    return total


# -- nodes -------------------------------------------------------------------------------
def parse_nodes(raw: str | bytes | Mapping[str, Any]) -> tuple[list[SlurmNode], list[Skipped]]:
    return _each(load_document(raw, "nodes"), parse_node, "node", "name")


def parse_node(rec: Mapping[str, Any]) -> SlurmNode:
    if not isinstance(rec, Mapping):
        raise TypeError("node record is not an object")
    name = text(rec["name"])
    if not name:
        raise ValueError("missing name")
    gres = gpu_count(text(rec.get("gres")).split("(")[0])
    used = text(rec.get("gres_used"))
    used_gpus = sum(_detail_gpus(part) for part in re.split(r",(?=gpu)", used) if part)
    state = rec.get("state")
    flags = rec.get("state_flags") or []
    state_txt = ",".join([text(state)] + [text(f) for f in flags]) if flags else text(state)
    cpus = num(rec["cpus"])
    mem = num(rec["real_memory"])
    if cpus is None or mem is None:
        raise ValueError("missing cpus or real_memory")
    parts = rec.get("partitions") or []
    return SlurmNode(name=name, cpus=cpus, mem_mb=mem, gpus=gres[0] if gres else 0,
                     alloc_cpus=num(rec.get("alloc_cpus"), 0) or 0,
                     alloc_mem_mb=num(rec.get("alloc_memory"), 0) or 0,
                     alloc_gpus=used_gpus, state=state_txt.lower(),
                     partitions=tuple(text(p) for p in parts),
                     gpu_type=gres[1] if gres else None,
                     reservation=text(rec.get("reservation")),
                     load=_load(rec.get("cpu_load")), host=text(rec.get("hostname")))


def _load(value: Any) -> float | None:
    """``cpu_load``: the node's load average in hundredths (every release), None where not
    reported or not a number (it only informs the closed loop's view of contention)."""
    try:
        n = num(value)
    except ValueError:
        return None
    return n / 100 if n is not None and n >= 0 else None


# -- partitions (scontrol show partition -o) ----------------------------------------------
def parse_partitions(raw: str) -> tuple[list[SlurmPartition], list[Skipped]]:
    parts, skipped = [], []
    for line in raw.splitlines():
        line = line.strip()
        if not line:
            continue
        fields = parse_kv_line(line)
        name = fields.get("PartitionName")
        if not name:
            skipped.append(Skipped("partition", f"no PartitionName in {line[:80]!r}"))
            continue
        try:
            defaults = dict(
                item.split("=", 1) for item in fields.get("JobDefaults", "").split(",")
                if "=" in item)
            parts.append(SlurmPartition(
                name=name, nodes=tuple(expand_hostlist(fields.get("Nodes", ""))),
                def_cpu_per_gpu=int(defaults["DefCpuPerGPU"]) if "DefCpuPerGPU" in defaults
                else None,
                def_mem_per_gpu_mb=int(defaults["DefMemPerGPU"]) if "DefMemPerGPU" in defaults
                else None,
                default=fields.get("Default") == "YES",
                max_cpus_per_node=_limit(fields.get("MaxCPUsPerNode")),
                max_mem_per_node_mb=_limit(fields.get("MaxMemPerNode"))))
        except ValueError as exc:
            skipped.append(Skipped(f"partition {name}", str(exc)))
    return parts, skipped


def _limit(value: str | None) -> int | None:
    """A partition limit: a number, or None for UNLIMITED / absent."""
    if value is None or value.upper() in ("UNLIMITED", "NONE", ""):
        return None
    return int(value)


def parse_kv_line(line: str) -> dict[str, str]:
    """``Key=value Key2=value two`` (scontrol -o): a token starts a new field only when it
    looks like one of Slurm's keys (capitalised, e.g. ``NtasksPerN:B:S:C=``), so a comment
    like ``vision synergy:profile=res18`` stays one value. Slurm prints each key once: the
    first occurrence is kept, and a key seen again is text of the field before it (a
    partition's or the config's text is an admin's; a job's record, where users write
    names and comments before and after Slurm's own keys, is read from ``squeue`` between
    random tokens instead: ``squeue_text.WRITER_FIELDS``)."""
    out: dict[str, str] = {}
    key = None
    for tok in line.split(" "):
        if "=" in tok and re.match(r"^[A-Z][A-Za-z0-9_/:]*=", tok) \
                and tok.split("=", 1)[0] not in out:
            key, val = tok.split("=", 1)
            out[key] = val
        elif key is not None and tok:
            out[key] += " " + tok
    return out

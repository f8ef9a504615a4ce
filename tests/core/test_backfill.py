"""Slurm's scheduler passes (core.backfill) on hand-made queues: strict priority per
partition in the main pass; in the backfill pass, lower jobs start only where they end,
by their time limits, before the reservations of the jobs above them."""

from synergy_slurm.core import ClusterState, PerGpu, Resources
from synergy_slurm.core.backfill import Busy, Waiting, backfill_pass, main_pass
from synergy_slurm.core.resources import Server

FAIR = PerGpu(3, 62.5)


def node(name="n1"):
    return Server(name, Resources(8, 24, 500.0))


def busy_cluster(used_gpus: int, until: float, names=("n1",)):
    servers = tuple(node(n) for n in names)
    held = FAIR.times(used_gpus)
    return (ClusterState(servers, ((names[0], held),)), [Busy(names[0], held, until)])


def job(i, gpus, limit, partition="gpu", names=("n1",), per_node=0):
    return Waiting(i, gpus, FAIR, limit, partition, frozenset(names), per_node)


def ids(starts):
    return [s.job_id for s in starts]


def test_the_main_pass_stops_a_partition_at_its_first_waiting_job():
    cluster, _ = busy_cluster(6, 1000.0)
    queue = [job(1, 8, 500), job(2, 2, 50)]
    assert ids(main_pass(queue, cluster, 0.0)) == []
    # Another partition on other nodes is not held up by it.
    two = ClusterState((node("n1"), node("n2")), (("n1", FAIR.times(6)),))
    queue = [job(1, 8, 500, "a", ("n1",)), job(2, 2, 50, "a", ("n1",)),
             job(3, 2, 50, "b", ("n2",))]
    assert ids(main_pass(queue, two, 0.0)) == [3]


def test_backfill_starts_only_what_ends_before_the_reservation():
    # 6 of 8 GPUs busy until t=1000 (their job's limit); job 1 needs all 8: it reserves
    # the node from t=1000. Job 2 (limit 2000) would still run then: it waits. Job 3
    # (limit 100) ends long before: it starts now.
    cluster, busy = busy_cluster(6, 1000.0)
    queue = [job(1, 8, 500), job(2, 2, 2000), job(3, 2, 100)]
    assert ids(backfill_pass(queue, cluster, busy, 0.0)) == [3]


def test_a_reservation_takes_the_whole_node_not_only_what_it_uses():
    """e2e_forecast seed 13 on 22.05 (#42): one node of 2 GPUs and 4 cores, a 3-core job
    running (limit 30 min), another waiting for its cores: it reserves the node from the
    first one's limit. A 1-core job (limit 30 min) would leave it room, 3 cores and a GPU,
    but backfill's node_space is a node bitmap: the node is the reservation's for that
    time, and the 1-core job waits (it did, 140 s, in the real run). One that ends before
    the reservation starts still goes."""
    one = ClusterState((Server("f", Resources(2, 4, 125.0)),),
                       (("f", Resources(1, 3, 62.5)),))
    busy = [Busy("f", Resources(1, 3, 62.5), 1800.0)]

    def w(i, cpus, limit):
        return Waiting(i, 1, PerGpu(cpus, 62.5), limit, "gpu", frozenset({"f"}), 0)

    assert ids(backfill_pass([w(1, 3, 1800), w(2, 1, 1800)], one, busy, 33.0)) == []
    assert ids(backfill_pass([w(1, 3, 1800), w(2, 1, 600)], one, busy, 33.0)) == [2]
    # Without the waiting 3-core job, the 1-core one starts at once.
    assert ids(backfill_pass([w(2, 1, 1800)], one, busy, 33.0)) == [2]


def test_a_job_beyond_the_test_depth_is_not_backfilled():
    cluster, busy = busy_cluster(6, 1000.0)
    queue = [job(1, 8, 500), job(2, 2, 2000), job(3, 2, 100)]
    assert ids(backfill_pass(queue, cluster, busy, 0.0, max_job_test=2)) == []


def test_a_reservation_beyond_the_window_does_not_block():
    cluster, busy = busy_cluster(6, 3 * 86400.0)
    queue = [job(1, 8, 500), job(2, 2, 2000)]
    assert ids(backfill_pass(queue, cluster, busy, 0.0)) == [2]


def test_placement_is_cons_tres_best_fit_then_spread_and_whole_nodes_per_node():
    names = ("n1", "n2", "n3")
    cluster = ClusterState(tuple(node(n) for n in names),
                           (("n1", FAIR.times(6)), ("n2", FAIR.times(4))))
    (s,) = main_pass([job(1, 2, 60, names=names)], cluster, 0.0)
    assert s.placement == (("n1", 2),)             # the fullest node that holds it
    full = ClusterState(tuple(node(n) for n in names),
                        tuple((n, FAIR.times(6)) for n in names))
    (s,) = main_pass([job(1, 4, 60, names=names)], full, 0.0)
    assert sum(g for _, g in s.placement) == 4 and len(s.placement) == 2   # spread
    assert main_pass([job(1, 4, 60, names=names, per_node=4)], full, 0.0) == []


def test_a_job_that_fits_whole_goes_to_the_tightest_run_then_the_fewest_free_cores():
    """cons_tres's _eval_nodes places a job that fits whole as it spreads one (runs of
    consecutive nodes of one weight, the tightest run, in it the node with the fewest free
    cores), not on the node with the fewest free GPUs. Two real 22.05 starts of
    e2e_whatif's paper seed 17 (#42), both of which the fewest-free-GPUs rule put
    elsewhere."""
    names = ("n1", "n2", "n3", "n4")

    def placed(share, gpus, used):
        cluster = ClusterState(tuple(node(n) for n in names), tuple(used.items()))
        (s,) = main_pass([Waiting(1, gpus, share, 300, "gpu", frozenset(names))], cluster,
                         0.0)
        return s.placement

    # Synergy's w10 (1 GPU at 6 cores): n2 has 3 GPUs and 10 cores free, n3 5 GPUs and
    # 6 cores: Slurm took n3; by free GPUs n2 is the fuller.
    assert placed(PerGpu(6, 62.5), 1, {"n1": Resources(8, 8, 160.0),
                                       "n2": Resources(5, 14, 227.5),
                                       "n3": Resources(3, 18, 437.5)}) == (("n3", 1),)
    # The plain window's w12 (4 GPUs): n1 idle, n2 1 GPU free, n3 5, n4 idle. n1 alone is
    # a tighter run than n3 with n4 beside it: Slurm took n1; by free GPUs n3.
    assert placed(FAIR, 4, {"n2": FAIR.times(7), "n3": FAIR.times(3)}) == (("n1", 4),)


def test_from_24_11_an_idle_node_that_holds_the_job_goes_first():
    """docs/slurm-notes.md: 24.11 and 26.05 took an idle node over the one a 2-GPU job
    would fill exactly; with no idle node, the fullest, as 22.05."""
    names = ("n1", "n2", "n3")
    cluster = ClusterState(tuple(node(n) for n in names),
                           (("n1", FAIR.times(6)), ("n2", FAIR.times(4))))
    (s,) = main_pass([job(1, 2, 60, names=names)], cluster, 0.0, idle_first=True)
    assert s.placement == (("n3", 2),)
    full = ClusterState(tuple(node(n) for n in names),
                        (("n1", FAIR.times(6)), ("n2", FAIR.times(4)), ("n3", FAIR.times(1))))
    (s,) = main_pass([job(1, 2, 60, names=names)], full, 0.0, idle_first=True)
    assert s.placement == (("n1", 2),)
    (s,) = backfill_pass([job(1, 2, 60, names=names)], cluster, [], 0.0, idle_first=True)
    assert s.placement == (("n3", 2),)


def test_a_job_no_node_holds_goes_to_the_nodes_with_the_most_usable_gpus_first():
    """cons_tres weighs each node by the GPUs the job could use there ("Favor nodes with
    more co-located GPUs", job_test.c, 22.05 to 26.05) and takes the lightest first, then
    the tightest that holds the rest. Both placements of e2e_whatif's 8-GPU w13 (mixed
    site, seed 17, 22.05) in the partition over both kinds of node: a1 full, a2 idle."""
    a = [Server(n, Resources(4, 64, 512.0)) for n in ("a1", "a2")]
    h = [Server(n, Resources(8, 96, 2000.0)) for n in ("h1", "h2")]
    names = frozenset(s.name for s in (*a, *h))

    def placed(share, used):
        cluster = ClusterState((*a, *h), tuple(used.items()))
        (s,) = main_pass([Waiting(1, 8, share, 300, "all", names)], cluster, 0.0)
        return dict(s.placement)

    # Synergy's run: 1 core per GPU; h1 has 5 GPUs free, h2 and a2 4 each. h1 first, then
    # h2, which holds the 3 left with fewer free cores than a2: a2 stays free for the
    # A100 partition (the fullest-first rule took a2 + h2).
    assert placed(PerGpu(1, 20.0), {"a1": Resources(4, 16, 142.5),
                                    "h1": Resources(3, 21, 437.5),
                                    "h2": Resources(4, 48, 500.0)}) == {"h1": 5, "h2": 3}
    # The plain run: 8 cores per GPU; h1 has 3 free, a2 and h2 4 each: a2 (more cores),
    # then h2, two nodes (the fullest-first rule took three: h1 3, a2 4, h2 1).
    assert placed(PerGpu(8, 64.0), {"a1": Resources(4, 64, 512.0),
                                    "h1": Resources(5, 48, 692.0),
                                    "h2": Resources(4, 48, 1000.0)}) == {"a2": 4, "h2": 4}

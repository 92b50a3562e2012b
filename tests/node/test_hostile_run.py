#!/usr/bin/python3
"""test_hostile_run.py GOSSIPNODE KEYGEN HOSTILE [--steps N] [--robust on|off]
[--attacks LIST] [--nodes N] [--no-assert]
[--health | --stop | --designed | --drift | --named]
- a trusted peer that lies, against two honest gossipnode processes on
127.0.0.1 (with --designed, N - 1 of N: --nodes N), and the same honest
nodes clean, in the same test.

--designed: the attacks designed for the defence (issue 32; default
--attacks drift,alie,drift*4, --nodes 4, --steps DESIGNED_STEPS): one
clean run,
then one run per attack, the liar (hostile_peer NAME) lying in each of its
scheduled turns for the whole run. Per round the merge cannot tell
these from honest turns (docs/history/liar-attacks.md; over a run the
evidence can: --named), so what is asserted is that each attack works
as designed, never a robustness the merge lacks: the liar sent
every lie at a turn the schedule gave it (its own count) and did so in
every honest node's rounds (at least MIN_TURNS judged contributions
each); the honest nodes counted almost all of it as scheduled (not_partner
at most NOT_PARTNER_FRAC of what they judged, the views' churn at start);
none of it was refused (no far, no nonfinite) and at least INSIDE_FRAC of
it was inside the radius (accepted, swayed or, once its evidence named
it, named); no honest node
rolled back. drift's mean offset from its bases is its parameter. A lie
sent C times (NAME*C) is taken once: the copies are refused as
`duplicate`, and no honest node's slice ever is (clean run). Each
honest node's accuracy, clean and attacked, is printed, not asserted.

--named: naming the liar (issue 32 item 4): NAMED_NODES nodes, one of
them the liar sending NAMED_ATTACK in each of its turns, NAMED_STEPS
steps (about 150 of its turns per honest node), clean first. Asserted:
no honest node marks another suspect_model, clean or attacked; at least
NAMED_MIN of the honest nodes mark the liar at the end, by its evidence
(gossip/robust.h: its slices refused as `named`); the honest nodes' mean
accuracy within NAMED_TOL points of their clean mean (issue 32's target
at 4 nodes).

--stop: the forged cluster-wide stop instead (issue 33 item 3). n0 and n1
train with --target-acc STOP_TARGET and --steps far beyond it; the liar
(hostile_peer "stop") leaves as soon as both are alive, with a TARGET
reason claiming 99% at step 0 in its own name. Asserted: each honest node
heard it and logged why it did not stop (1 of 2 votes needed, and at its
next evaluation its own accuracy below target - 1, unless that evaluation
reached the target); each trained on and stopped later, either at its own
evaluation of at least target - 1 point, or on a quorum (2 of 3 members)
completed by the other honest node's own target, reached before: the
liar's word alone stops nobody. Both exit 0, within STOP_STEPS_APART
steps of each other. On the code before issue 33 both
stopped at the liar's word in their first steps.

--drift: model health against a slow divergence (issue 32 item 3). n0
and n1 train DRIFT_STEPS clean, then again while the liar sends
DRIFT_ATTACK (a fixed direction inside the radius, several copies per
turn), both with --robust off: each copy is averaged in, the drift that
grows the weights and takes a node to 30-60 % without model health.
With robust merge on the copies are refused as `duplicate` and nothing
diverges (test_hostile_designed), so only a node without the merge (or
a lie that gets past it) shows model health's absolute criteria at work.
Asserted: no honest node rolled back in the clean run; in the attacked
run at least one honest node rolled back on an absolute criterion (worse
than chance, parameter norm, accuracy drop: nn/health.h) and refused at
least one peer for it (the quarantine, gossip/robust.h, which works with
the merge off too); the honest nodes' mean accuracy ends within
DRIFT_TOL points of their clean mean (a node moves by several points
run to run under this attack).

--health: the model-health test instead. One poisoning, once: the liar
sends 1e30 slices a single time when a node reaches step STEPS/3
(hostile_peer "huge@STEP"). n0 runs with --robust off, so the poison gets
into its model; n1 with robust merge on refuses it. Asserted: n0 saw its
model break and rolled back (model health), at least once; n1 never rolled
back; n0 ends within TOL points of n1 (accuracies as below, LAST_EVALS).
No clean run is needed.

Three keys are made (n0, n1 honest; n2 the liar), one peers file lists all
three for both runs. Run 1 (clean): n0 and n1 train --steps N. Run 2
(attacked): n0 and n1 train the same N steps with the same seed and keys
while tests/node/hostile_peer (key n2) pushes, the whole time, 1e30
slices, the sign-flipped trained model, N(0,1) noise, the model x10, the
step-0 model and NaN/Inf (see hostile_peer.c).

Asserted (unless --no-assert; the bench in docs/reliability.md uses it to
measure robust merge off):
  - each honest node's test accuracy in run 2 (the mean of its last three
    evaluations, LAST_EVALS) is within TOL points of the same node's in
    run 1;
  - the honest nodes counted the liar's contributions under their
    reasons: far (1e30, flip, noise, x10), nonfinite (NaN/Inf),
    out_of_window (step 0), not_partner (sent out of turn);
  - the liar is marked suspect_model by both honest nodes;
  - no honest node rolled back (robust merge kept the model healthy).
Prints every figure it measured. Exit 0 pass, 1 fail, 77 skip (no data).
GN_SEED sets --seed.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cluster_run as tc  # noqa: E402

TOL = 1.0  # percentage points, the bound
STOP_TARGET = tc.STOP_TARGET  # % (--stop): reached in a few hundred steps
STOP_MARGIN = 1.0  # points: gossip/stop.h GOSSIP_STOP_MARGIN_BP
STOP_STEPS_APART = 300  # as test_cluster_run.py's STOP_STEPS_AFTER
STOP_WITHIN_S = 300  # the honest nodes reach the target within this
# A node's accuracy is the mean of its last three evaluations (the last
# half of the run, the last at the final step), not the final one alone:
# one evaluation at step 300 moves by up to a point from run to run on a
# starved machine, as much as the bound (CI once: n1 81.05% attacked
# against 82.67% clean while its training thread computed 37% of the
# time; 13 runs here, 5 beside two busy loops: -0.47 to +0.32).
LAST_EVALS = 3
# --designed (see above). 1000 steps: 100 rounds, so each of 3 honest
# nodes of 4 has the liar as its sender in about 33 of them. At 400 the
# model still moved so fast between a node's slice to the liar and the
# liar's turn that a third of the lies landed beyond the radius in 3 of
# 5 runs on an idle machine; at 1000, 15 runs saw 87-100 % accepted and
# none refused. A run takes 9-50 s on this 2-core machine (idle to load
# 20), the test 30-150 s.
DESIGNED_STEPS = 1000
# --drift (see above): 8 copies of drift per turn, the attack of
# docs/history/liar-attacks.md that hurt most; 1500 steps as its bench.
DRIFT_ATTACK = "drift*8"
DRIFT_STEPS = 1500
# With --robust off, the rollbacks alone (no quarantine) left the two
# honest nodes 16.5 points under clean on average (one run: -12.8 and
# -20.8); with the quarantine 7 runs gave -2.2 to -7.7 per node and one
# more a mean beyond 8. 10 points keeps the two apart with a margin for
# this 2-core machine's noise.
DRIFT_TOL = 10.0
# Evaluations are where the chance and accuracy criteria look: every 25
# steps (60 in the run; the batch losses' relative test sees the louder
# pushes between them). At 50, the accuracy dips a verdict needs were
# sampled too rarely: 5 of 16 node-runs had no absolute verdict and one
# CI run of 5 had none on either node; at 25, 1 of 16 (2026-12-07).
DRIFT_EVAL_EVERY = 25
ABSOLUTE = r"model health: (worse than chance|parameter norm|accuracy drop)"
MIN_TURNS = 5
NOT_PARTNER_FRAC = 0.25
# The liar's base is the newest slice a node sent it of that part, up to
# a few rounds older than the node's own copy, so a lie of 1.5 % of RMS
# lands a bit further than designed; 2-5 % of them were clipped in the
# runs of docs/history/liar-attacks.md, none refused. The drift liar's
# offset is fixed, not adaptive, and the radius moves with each node's
# recent distances: 0-16 % of its lies were clipped at a node in 7 local
# runs and 29 % (9 of 31, drift*4 at n1) in one CI run, so "inside" means
# most of them, not three in four.
INSIDE_FRAC = 0.5


def run(c, binary_hostile, tmp, name, steps, robust, attacks, seed,
        node_args=None, watch=None, timeout=400):
    """Train the honest nodes n0..n(N-2) of c (N keys; the last one, the
    liar's, is n(N-1)) for `steps`, with the liar if attacks; robust is
    "on", "off" or a list of one per node. node_args(i), if given, lists
    more options for honest node i; watch(c), if given, is called about
    every second while they train. Returns ({node: final acc}, {node: log text}, liar's
    output)."""
    honest = c.n - 1
    rundir = os.path.join(tmp, name)
    os.makedirs(rundir)
    for i in range(c.n):
        shutil.copy2(os.path.join(tmp, "k%d" % i), rundir)
    c.tmp, c.procs = rundir, {}
    if isinstance(robust, str):
        robust = [robust] * honest
    extra = ["--steps", str(steps), "--eval-every",
             str(max(steps // LAST_EVALS // 2, 1))]
    liar = None
    if attacks:
        args = [binary_hostile, attacks, "600", "--peers", c.peers, "--key",
                os.path.join(rundir, "k%d" % honest), "--shard",
                "%d/%d" % (honest, c.n), "--seed", str(seed), "--threads",
                "1"] + tc.COMMON
        liar = subprocess.Popen(args, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True)
    t0 = time.time()
    for i in range(honest):
        c.start(i, extra + ["--robust", robust[i]] +
                (node_args(i) if node_args else []))
    try:
        end = time.time() + timeout
        while any(c.procs[i].poll() is None for i in range(honest)):
            assert time.time() < end, "%s: still training after %d s" % (
                name, timeout)
            if watch:
                watch(c)
            time.sleep(1.0)
        for i in range(honest):
            rc = c.procs[i].wait()
            assert rc == 0, "%s: n%d exited %d" % (name, i, rc)
        print("%s run: %.1f s wall for %d steps" % (name, time.time() - t0,
                                                    steps))
    finally:
        out = ""
        if liar:
            liar.terminate()
            try:
                out = liar.communicate(timeout=20)[0]
            except subprocess.TimeoutExpired:
                liar.kill()
                out = liar.communicate()[0]
    accs = {i: late_acc(c, i) for i in range(honest)}
    logs = {i: open(c.log_path(i)).read() for i in range(honest)}
    return accs, logs, out


def late_acc(c, i):
    """Node i's mean test accuracy over its last LAST_EVALS evaluations
    (the last at the final step)."""
    ev = [e["test_acc"] for e in c.events(i, "eval")][-LAST_EVALS:]
    assert len(ev) == LAST_EVALS, "n%d: evaluations %s" % (i, ev)
    return sum(ev) / len(ev)


def robust_counts(log, peer):
    """The robust-merge line about `peer` in a node's summary: its counts
    by reason, "sway" (its consistency, gossip/robust.h; NaN from a node
    before it), "evidence" (what names it, NaN: too few turns),
    "evidence_pull" and "evidence_push" (each figure's Welch t),
    "evidence_pull_d" and "evidence_push_d" (each figure's least mean
    difference against the other senders; NaN from a node before them) and
    "suspect_model"."""
    m = re.search(r"robust merge peer %s( suspect_model)?: (\d+) accepted, "
                  r"(\d+) clipped, (\d+) far, (\d+) nonfinite, (\d+) "
                  r"not_partner, (\d+) out_of_window, (\d+) mismatch, "
                  r"(\d+) quarantined, (\d+) duplicate"
                  r"(?:, (\d+) swayed, (\d+) named; sway (\S+); "
                  r"evidence (\S+) \(pull (\S+), push ([^)]+)\);"
                  r"(?: differences pull (\S+), push ([^;]+);)?)?"
                  % peer, log)
    if not m:
        return None
    keys = ["accepted", "clipped", "far", "nonfinite", "not_partner",
            "out_of_window", "mismatch", "quarantined", "duplicate",
            "swayed", "named"]
    d = dict(zip(keys, [int(x or 0) for x in m.groups()[1:12]]))
    d["sway"] = float(m.group(13) or "nan")
    d["evidence"] = float(m.group(14) or "nan")
    d["evidence_pull"] = float(m.group(15) or "nan")
    d["evidence_push"] = float(m.group(16) or "nan")
    d["evidence_pull_d"] = float(m.group(17) or "nan")
    d["evidence_push_d"] = float(m.group(18) or "nan")
    d["suspect_model"] = m.group(1) is not None
    return d


def rollbacks(log):
    return len(re.findall(r"model health: .* rolled back", log))


def health(c, hostile, tmp, steps, seed):
    """The model-health test (--health); raises AssertionError."""
    at = max(steps // 3, 1)
    accs, logs, out = run(c, hostile, tmp, "poisoned", steps, ["off", "on"],
                          "huge@%d" % at, seed)
    print("liar: " + " | ".join(out.strip().splitlines()[-1:]))
    rb = [rollbacks(logs[i]) for i in range(2)]
    for i in range(2):
        print("n%d (robust %s): %.2f%%, rollbacks %d"
              % (i, "off" if i == 0 else "on", accs[i], rb[i]))
    m = re.search(r"sent huge (\d+)", out)
    assert m and int(m.group(1)) > 0, "the liar sent nothing: %r" % out
    assert rb[0] >= 1, "n0 took the poison without a rollback"
    assert rb[1] == 0, "n1 (robust on) rolled back"
    assert abs(accs[0] - accs[1]) <= TOL, \
        "n0 %.2f%% vs n1 %.2f%% after the rollback" % (accs[0], accs[1])


def forged_stop(c, hostile, tmp, seed):
    """The forged-stop test (--stop); raises AssertionError."""
    rundir = os.path.join(tmp, "stop")
    os.makedirs(rundir)
    for i in range(3):
        shutil.copy2(os.path.join(tmp, "k%d" % i), rundir)
    c.tmp, c.procs = rundir, {}
    liar = subprocess.Popen(
        [hostile, "stop", "600", "--peers", c.peers, "--key",
         os.path.join(rundir, "k2"), "--shard", "2/3", "--seed", str(seed),
         "--threads", "1"] + tc.COMMON,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, text=True)
    for i in range(2):
        c.start(i, ["--steps", "100000", "--eval-every", "20",
                    "--target-acc", "%.1f" % STOP_TARGET])
    try:
        for i in range(2):
            try:
                rc = c.procs[i].wait(STOP_WITHIN_S)
            except subprocess.TimeoutExpired:
                raise AssertionError("n%d did not stop within %d s"
                                     % (i, STOP_WITHIN_S))
            assert rc == 0, "n%d exited %d" % (i, rc)
    finally:
        liar.terminate()
        try:
            out = liar.communicate(timeout=20)[0]
        except subprocess.TimeoutExpired:
            liar.kill()
            out = liar.communicate()[0]
    print("liar: " + " | ".join(out.strip().splitlines()[-2:]))
    assert "sent stop 1" in out, "the liar did not leave: %r" % out
    stops = [c.events(i, "stop")[-1] for i in range(2)]
    print("stops: %s" % stops)
    for i in range(2):
        log = open(c.log_path(i)).read()
        heard = re.search(r"n2 left saying n2 reached the target \(99\.00% "
                          r"at step 0\); not honoured yet \(1 of 2 votes "
                          r"needed\)", log)
        judged = re.search(r"a peer's stop not honoured: 1 of 2 votes "
                           r"needed, our accuracy ([0-9.]+)% < ", log)
        print("n%d: heard %s, judged %s" % (
            i, bool(heard), judged.group(0) if judged else None))
        assert heard, "n%d never logged the liar's stop as not honoured" % i
        s, other = stops[i], stops[1 - i]
        # judged at its next evaluation, unless that evaluation reached
        # the target itself
        assert judged or s["reason"] == "target", \
            "n%d never judged it by its own accuracy" % i
        assert not judged or \
            float(judged.group(1)) < STOP_TARGET - STOP_MARGIN, judged
        # The claim (gossip/stop.h): the liar's word alone stops nobody.
        # A node stops at its own evaluation, or on a quorum that needs
        # an honest vote: the other honest node's own target, reached
        # before (with 3 members the quorum is 2, so liar + that node).
        # Its own evaluation within the margin (its target, or rule (a)
        # on a reason heard: reason `cluster`) is always fine.
        assert s["reason"] in ("target", "cluster"), s
        if s["reason"] == "target" or \
                s["test_acc"] >= STOP_TARGET - STOP_MARGIN:
            assert s["test_acc"] >= STOP_TARGET - STOP_MARGIN, \
                "n%d stopped at %.2f%%, target %.1f%%" % (
                    i, s["test_acc"], STOP_TARGET)
        else:
            assert other["reason"] == "target" and \
                other["test_acc"] >= STOP_TARGET - STOP_MARGIN and \
                other["t_ms"] <= s["t_ms"], \
                "n%d stopped on the cluster's word (%s) before any honest " \
                "node reached the target (%s)" % (i, s, other)
    apart = abs(stops[0]["step"] - stops[1]["step"])
    assert apart <= STOP_STEPS_APART, \
        "the honest nodes stopped %d steps apart" % apart


def attacked(c, hostile, tmp, steps, seed, opts, check):
    """The attack test (default); raises AssertionError."""
    clean, _, _ = run(c, hostile, tmp, "clean", steps, opts["--robust"],
                      None, seed)
    att, logs, out = run(c, hostile, tmp, "attacked", steps,
                         opts["--robust"], opts["--attacks"], seed)
    print("liar: " + " | ".join(out.strip().splitlines()[-6:]))
    for i in range(2):
        rc = robust_counts(logs[i], "n2")
        print("n%d: clean %.2f%%, attacked %.2f%% (diff %+.2f), "
              "rollbacks %d, liar counted %s"
              % (i, clean[i], att[i], att[i] - clean[i],
                 rollbacks(logs[i]), rc))
    if check:
        for i in range(2):
            assert abs(att[i] - clean[i]) <= TOL, \
                "n%d: %.2f%% attacked vs %.2f%% clean" % (
                    i, att[i], clean[i])
            rc = robust_counts(logs[i], "n2")
            assert rc, "n%d logged no robust-merge record of n2" % i
            for reason in ("far", "nonfinite", "out_of_window",
                           "not_partner"):
                assert rc[reason] > 0, \
                    "n%d counted no %s from n2: %s" % (i, reason, rc)
            assert rc["suspect_model"], "n%d did not mark n2" % i
            assert rollbacks(logs[i]) == 0, "n%d rolled back" % i


def designed(c, hostile, tmp, steps, seed, attacks):
    """The designed attacks (--designed); raises AssertionError."""
    honest, liar = c.n - 1, "n%d" % (c.n - 1)
    clean, logs, _ = run(c, hostile, tmp, "clean", steps, "on", None, seed)
    # an honest node sends each step's slice once: no copy is refused
    for i in range(honest):
        for j in range(honest):
            rc = robust_counts(logs[i], "n%d" % j) if i != j else None
            assert not rc or rc["duplicate"] == 0, \
                "n%d refused copies from honest n%d: %s" % (i, j, rc)
    for a in attacks:
        att, logs, out = run(c, hostile, tmp, a, steps, "on", a, seed)
        print("liar: " + " | ".join(out.strip().splitlines()[-2:]))
        name = re.split(r"[:*]", a)[0]
        m = re.search(r"sent %s (\d+) \((\d+) at our scheduled turn\)"
                      % re.escape(name), out)
        assert m and int(m.group(1)) > 0, "%s: the liar sent nothing: %r" % (
            a, out)
        assert m.group(1) == m.group(2), \
            "%s: the liar sent out of its turns: %s" % (a, m.group(0))
        for i in range(honest):
            rc = robust_counts(logs[i], liar)
            print("n%d %s: clean %.2f%%, attacked %.2f%% (diff %+.2f), "
                  "rollbacks %d, liar counted %s"
                  % (i, a, clean[i], att[i], att[i] - clean[i],
                     rollbacks(logs[i]), rc))
            assert rc, "n%d logged no robust-merge record of %s" % (i, liar)
            judged = rc["accepted"] + rc["clipped"] + rc["far"] + \
                rc["nonfinite"] + rc["swayed"] + rc["named"]
            assert judged >= MIN_TURNS, \
                "n%d judged only %d of the liar's slices: %s" % (i, judged, rc)
            assert rc["not_partner"] <= NOT_PARTNER_FRAC * judged, \
                "n%d: the liar's slices out of turn: %s" % (i, rc)
            assert rc["far"] == 0 and rc["nonfinite"] == 0, \
                "n%d refused the liar's %s: %s" % (i, a, rc)
            assert rc["accepted"] + rc["swayed"] + rc["named"] >= \
                INSIDE_FRAC * judged, \
                "n%d: %s did not stay inside the radius: %s" % (i, a, rc)
            assert rollbacks(logs[i]) == 0, "n%d rolled back" % i
            # NAME*C: each lie sent C times; all but the first refused
            # as copies (at least half of the C - 1 per judged lie: some
            # copies arrive when the step has left the window)
            copies = int(a.split("*")[1]) if "*" in a else 1
            assert rc["duplicate"] >= (copies - 1) * judged / 2, \
                "n%d: %s's copies were not refused: %s" % (i, a, rc)
        if name == "drift":
            want = float(a.split(":")[1].split("*")[0]) if ":" in a \
                else 0.015
            m = re.search(r"offset ([0-9.]+) x RMS", out)
            assert m and abs(float(m.group(1)) - want) < 1e-3, \
                "drift's offset is not its parameter %g: %r" % (want, out)


def drift(c, hostile, tmp, steps, seed):
    """Model health against a slow divergence (--drift); raises
    AssertionError."""
    clean, clogs, _ = run(c, hostile, tmp, "clean", steps, "off", None, seed,
                          node_args=lambda i: ["--eval-every",
                                               str(DRIFT_EVAL_EVERY)])
    att, logs, out = run(c, hostile, tmp, "attacked", steps, "off",
                         DRIFT_ATTACK, seed,
                         node_args=lambda i: ["--eval-every",
                                              str(DRIFT_EVAL_EVERY)])
    print("liar: " + " | ".join(out.strip().splitlines()[-2:]))
    verdicts = 0
    for i in range(2):
        lines = [ln for ln in logs[i].splitlines()
                 if re.search(ABSOLUTE, ln)]
        for ln in lines:
            print("n%d: %s" % (i, ln.strip()))
        # a restart line ("... again ..., judging from this model on")
        # names a criterion too but is no verdict and refuses no one
        refused = [re.search(r"refusing (\d+) peer", ln) for ln in lines]
        verdicts += sum(int(m.group(1)) > 0 for m in refused if m)
        print("n%d: clean %.2f%% (rollbacks %d), attacked %.2f%% (diff "
              "%+.2f), rollbacks %d, absolute verdicts %d"
              % (i, clean[i], rollbacks(clogs[i]), att[i], att[i] - clean[i],
                 rollbacks(logs[i]), len(lines)))
    for i in range(2):
        assert rollbacks(clogs[i]) == 0, "n%d rolled back in the clean run" % i
    mean_att, mean_clean = sum(att.values()) / 2, sum(clean.values()) / 2
    assert mean_att >= mean_clean - DRIFT_TOL, \
        "honest nodes %.2f%% attacked vs %.2f%% clean" % (mean_att, mean_clean)
    assert verdicts > 0, "no absolute verdict refused a peer"


# --named: the liar that pulls its victims back along their own path
# (echo: each node's own older slice sent back), named within 21-56 of
# its turns at 4500 steps in the runs of docs/benchmarks.md
NAMED_NODES = 4
NAMED_STEPS = 4500
NAMED_ATTACK = "echo"
NAMED_MIN = 2
NAMED_TOL = 2.0


def summary_marks(log):
    """The peers a node's leave summary marks suspect_model."""
    return set(re.findall(r"robust merge peer (\S+) suspect_model:", log))


def named(c, hostile, tmp, steps, seed):
    """Naming the liar (--named); raises AssertionError."""
    honest, liar = c.n - 1, "n%d" % (c.n - 1)
    clean, logs, _ = run(c, hostile, tmp, "clean", steps, "on", None, seed)
    for i in range(honest):
        assert not summary_marks(logs[i]), \
            "clean run: n%d marked %s" % (i, summary_marks(logs[i]))
    att, logs, out = run(c, hostile, tmp, NAMED_ATTACK, steps, "on",
                         NAMED_ATTACK, seed)
    print("liar: " + " | ".join(out.strip().splitlines()[-2:]))
    marked = 0
    for i in range(honest):
        rc = robust_counts(logs[i], liar)
        print("n%d: clean %.2f%%, attacked %.2f%% (diff %+.2f), liar %s"
              % (i, clean[i], att[i], att[i] - clean[i], rc))
        assert summary_marks(logs[i]) <= {liar}, \
            "n%d marked an honest node: %s" % (i, summary_marks(logs[i]))
        if rc and rc["suspect_model"] and rc["named"] > 0:
            marked += 1
    assert marked >= NAMED_MIN, "the liar named by %d of %d honest nodes" % (
        marked, honest)
    mc = sum(clean.values()) / honest
    ma = sum(att.values()) / honest
    assert ma >= mc - NAMED_TOL, \
        "honest nodes %.2f%% attacked vs %.2f%% clean" % (ma, mc)


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        print(__doc__)
        return 2
    binary, keygen, hostile = args[:3]
    opts = {"--steps": "300", "--robust": "on", "--attacks": "all"}
    check = "--no-assert" not in args
    mode_health = "--health" in args
    mode_stop = "--stop" in args
    mode_designed = "--designed" in args
    mode_drift = "--drift" in args
    mode_named = "--named" in args
    if mode_named:
        opts.update({"--steps": str(NAMED_STEPS)})
    if mode_designed:
        opts.update({"--steps": str(DESIGNED_STEPS), "--nodes": "4",
                     "--attacks": "drift,alie,drift*4"})
    if mode_drift:
        opts.update({"--steps": str(DRIFT_STEPS), "--attacks": DRIFT_ATTACK})
    rest = [a for a in args[3:]
            if a not in ("--no-assert", "--health", "--stop", "--designed",
                         "--drift", "--named")]
    for k, v in zip(rest[::2], rest[1::2]):
        opts[k] = v
    if not os.path.isdir(tc.DATA):
        print("SKIP: no %s" % tc.DATA)
        return 77
    seed = int(os.environ.get("GN_SEED", "1"))
    steps = int(opts["--steps"])
    print("# GN_SEED=%d steps=%d robust=%s attacks=%s" %
          (seed, steps, opts["--robust"], opts["--attacks"]))
    tmp = tempfile.mkdtemp(prefix="gn-hostile-")
    nodes = int(opts["--nodes"]) if mode_designed else \
        NAMED_NODES if mode_named else 3
    c = tc.Cluster(binary, keygen, nodes, tmp, seed)
    ok = False
    try:
        if mode_health:
            health(c, hostile, tmp, steps, seed)
        elif mode_stop:
            forged_stop(c, hostile, tmp, seed)
        elif mode_drift:
            drift(c, hostile, tmp, steps, seed)
        elif mode_named:
            named(c, hostile, tmp, steps, seed)
        elif mode_designed:
            designed(c, hostile, tmp, steps, seed,
                     opts["--attacks"].split(","))
        else:
            attacked(c, hostile, tmp, steps, seed, opts, check)
        ok = True
    except AssertionError as e:
        print("FAIL: %s" % e)
    finally:
        c.kill_all()
        if not ok:
            c.dump()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

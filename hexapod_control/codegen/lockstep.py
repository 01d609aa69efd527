"""The lockstep loop's steps in C, appended to the control cycle's C file after the plant step.

``python -m hexapod_control.codegen`` writes ``hexapod_lockstep`` at the end of
``model/generated/control_cycle.c``. simulation/compiled_lockstep.py calls it for the steps of
:meth:`LockstepLoop.run_blocks` (simulation/lockstep.py) that the compiled step answers: per step,
the plant's state is measured (an ideal sensor), the whole step answers it against the reference
grid (as ``hexapod_step_message`` does after reading a message's bytes), the answer goes through
the loop's transport delay (simulation/delay.py's DelayedPlant: the same two uniform draws per
command, given by the caller) and the plant steps once (``hexapod_plant_step``). Each step writes
one row of ``LOCKSTEP_ROW``. It returns to the caller, which runs the rest in Python:

- ``finished``: the steps asked for are done;
- ``answered``: the last step's answer needs a diagnostics status (one is due, or the law's status
  is not ok); that step is done;
- ``pending``: the compiled step left the step at ``done`` to Python (``status`` says why); the
  plant and the transport have not moved for it;
- ``plant``: the C plant step refused the step at ``done`` after it was answered and its command
  sent: the Python plant steps it (and raises where it diverged).
"""

from __future__ import annotations

from hexapod_control.codegen.control_cycle import CYCLE_STATE, _layout, _offsets

# Commands in flight at most (DelayedPlant's queue); a longer delay runs the Python lockstep.
FLIGHT_CAPACITY = 16
FLIGHT_ENTRY = 7  # arrival step, forces (6)
# The loop's state between calls: the plant's (q, q_d, the drives' saturated forces, phi, its
# KinematicState in the control cycle's state layout, the force limit), the transport's, the
# caller's due time of the next diagnostics status, and what the call returns.
LOCKSTEP_STATE = (
    ("q", 6), ("qd", 6), ("forces", 6), ("phi", 3), ("warm", sum(size for _, size in CYCLE_STATE)),
    ("force_limit", 1),
    ("delayed", 1), ("periods", 1), ("jitter", 1), ("drop", 1), ("transport_step", 1), ("last_arrival", 1),
    ("sent", 1), ("lost", 1), ("flight_count", 1), ("flight_head", 1), ("flight", FLIGHT_CAPACITY * FLIGHT_ENTRY),
    ("diagnostic_due", 1), ("done", 1), ("reason", 1), ("status", 1),
)
# One row per step: the stamp, the measured state, the forces acting when it was measured, the
# answer, the pose of the measured state, the reference it was answered against.
LOCKSTEP_ROW = (("t", 1), ("q", 6), ("qd", 6), ("applied", 6), ("forces", 6), ("pose", 6), ("reference", 18))
LOCKSTEP_REASONS = ("finished", "answered", "pending", "plant")

TEMPLATE = r"""
/* ------------------------------------------------------------------------------ the lockstep loop */
/* LockstepLoop's steps (codegen/lockstep.py), called by simulation/compiled_lockstep.py.
 *
 *   int hexapod_lockstep(void *const step_arrays[11], void *const plant_arrays[4], double lock[...],
 *                        const double stamps[count], const double draws[2 count], double rows[...],
 *                        long count)
 *
 * step_arrays: as for hexapod_step_message (wire, learned bytes and command unused); plant_arrays:
 * the plant step's settings, drives, settings, parameters. Returns the reason (LOCKSTEP_REASON_*),
 * also in lock[LOCKSTEP_REASON], with the steps done in lock[LOCKSTEP_DONE]. */

/* DelayedPlant.apply_forces: the command is lost, or joins the queue at its arrival step. */
static void lockstep_send(double *lock, const double *forces, const double *draws)
{
    if (lock[LOCKSTEP_DELAYED] == 0.0) { /* no transport: EmbeddedSimulator.apply_forces */
        const double limit = lock[LOCKSTEP_FORCE_LIMIT];
        for (int k = 0; k < 6; ++k) {
            lock[LOCKSTEP_FORCES + k] = fmin(fmax(forces[k], -limit), limit);
        }
        return;
    }
    lock[LOCKSTEP_SENT] += 1.0;
    const int lost = draws[0] < lock[LOCKSTEP_DROP];
    const double extra = draws[1] * (lock[LOCKSTEP_JITTER] + 1.0);
    if (lost) {
        lock[LOCKSTEP_LOST] += 1.0;
        return;
    }
    const double arrival = fmax(lock[LOCKSTEP_TRANSPORT_STEP] + lock[LOCKSTEP_PERIODS] + floor(extra),
                                lock[LOCKSTEP_LAST_ARRIVAL]);
    lock[LOCKSTEP_LAST_ARRIVAL] = arrival;
    const int count = (int)lock[LOCKSTEP_FLIGHT_COUNT];
    const int slot = ((int)lock[LOCKSTEP_FLIGHT_HEAD] + count) % LOCKSTEP_FLIGHT_CAPACITY;
    double *entry = lock + LOCKSTEP_FLIGHT + LOCKSTEP_FLIGHT_ENTRY * slot;
    entry[0] = arrival;
    memcpy(entry + 1, forces, 6 * sizeof(double));
    lock[LOCKSTEP_FLIGHT_COUNT] = count + 1;
}

/* DelayedPlant.step's delivery: the forces acting over this step (the newest arrival due wins,
 * saturated as EmbeddedSimulator.apply_forces does), and how many commands leave the queue. */
static int lockstep_deliver(const double *lock, double *acting)
{
    memcpy(acting, lock + LOCKSTEP_FORCES, 6 * sizeof(double));
    if (lock[LOCKSTEP_DELAYED] == 0.0) {
        return 0;
    }
    const int count = (int)lock[LOCKSTEP_FLIGHT_COUNT], head = (int)lock[LOCKSTEP_FLIGHT_HEAD];
    const double limit = lock[LOCKSTEP_FORCE_LIMIT];
    int delivered = 0;
    while (delivered < count) {
        const double *entry = lock + LOCKSTEP_FLIGHT + LOCKSTEP_FLIGHT_ENTRY * ((head + delivered) % LOCKSTEP_FLIGHT_CAPACITY);
        if (!(entry[0] <= lock[LOCKSTEP_TRANSPORT_STEP])) {
            break;
        }
        for (int k = 0; k < 6; ++k) {
            acting[k] = fmin(fmax(entry[1 + k], -limit), limit);
        }
        ++delivered;
    }
    return delivered;
}

static int lockstep_return(double *lock, long done, int reason, int status)
{
    lock[LOCKSTEP_DONE] = (double)done;
    lock[LOCKSTEP_REASON] = reason;
    lock[LOCKSTEP_STATUS] = status;
    return reason;
}

int hexapod_lockstep(void *const *step_arrays, void *const *plant_arrays, double *lock, const double *stamps,
                     const double *draws, double *rows, long count)
{
    double *inputs = step_arrays[0];
    const double *out = step_arrays[6];
    for (long j = 0; j < count; ++j) {
        const double stamp = stamps[j];
        inputs[INPUT_NOW] = stamp;
        inputs[INPUT_STAMP] = stamp;
        memcpy(inputs + INPUT_Q, lock + LOCKSTEP_Q, 6 * sizeof(double));
        memcpy(inputs + INPUT_QD, lock + LOCKSTEP_QD, 6 * sizeof(double));
        inputs[INPUT_EFFORT_GIVEN] = 0.0;
        memset(inputs + INPUT_EFFORT, 0, 6 * sizeof(double));
        const int status = step_inputs(step_arrays, 1);
        if (status != STEP_STATUS_ANSWERED) {
            return lockstep_return(lock, j, LOCKSTEP_REASON_PENDING, status);
        }
        double *row = rows + j * LOCKSTEP_ROW_SIZE;
        row[LOCKSTEP_ROW_T] = stamp;
        memcpy(row + LOCKSTEP_ROW_Q, lock + LOCKSTEP_Q, 6 * sizeof(double));
        memcpy(row + LOCKSTEP_ROW_QD, lock + LOCKSTEP_QD, 6 * sizeof(double));
        memcpy(row + LOCKSTEP_ROW_APPLIED, lock + LOCKSTEP_FORCES, 6 * sizeof(double));
        memcpy(row + LOCKSTEP_ROW_FORCES, out + OUTPUT_FORCES, 6 * sizeof(double));
        memcpy(row + LOCKSTEP_ROW_POSE, out + OUTPUT_POSE, 6 * sizeof(double));
        memcpy(row + LOCKSTEP_ROW_REFERENCE, inputs + INPUT_REFERENCE, 18 * sizeof(double));
        lockstep_send(lock, out + OUTPUT_FORCES, draws + 2 * j);
        double acting[6], stepped[PLANT_SIZE];
        const int delivered = lockstep_deliver(lock, acting);
        if (hexapod_plant_step(lock + LOCKSTEP_Q, lock + LOCKSTEP_QD, acting, lock + LOCKSTEP_WARM, plant_arrays[0],
                               plant_arrays[1], plant_arrays[2], plant_arrays[3], stepped) != STATUS_OK) {
            return lockstep_return(lock, j, LOCKSTEP_REASON_PLANT, STEP_STATUS_ANSWERED);
        }
        memcpy(lock + LOCKSTEP_Q, stepped + PLANT_Q, 6 * sizeof(double));
        memcpy(lock + LOCKSTEP_QD, stepped + PLANT_QD, 6 * sizeof(double));
        memcpy(lock + LOCKSTEP_PHI, stepped + PLANT_PHI, 3 * sizeof(double));
        memcpy(lock + LOCKSTEP_WARM, stepped + PLANT_STATE, STATE_SIZE * sizeof(double));
        memcpy(lock + LOCKSTEP_FORCES, acting, 6 * sizeof(double));
        if (lock[LOCKSTEP_DELAYED] != 0.0) {
            lock[LOCKSTEP_FLIGHT_HEAD] = ((int)lock[LOCKSTEP_FLIGHT_HEAD] + delivered) % LOCKSTEP_FLIGHT_CAPACITY;
            lock[LOCKSTEP_FLIGHT_COUNT] -= delivered;
            lock[LOCKSTEP_TRANSPORT_STEP] += 1.0;
        }
        if (stamp >= lock[LOCKSTEP_DIAGNOSTIC_DUE] || out[OUTPUT_LAW_STATUS] != 0.0) {
            return lockstep_return(lock, j + 1, LOCKSTEP_REASON_ANSWERED, STEP_STATUS_ANSWERED);
        }
    }
    return lockstep_return(lock, count, LOCKSTEP_REASON_FINISHED, STEP_STATUS_ANSWERED);
}
"""


def lockstep_source() -> str:
    """The lockstep loop's part of control_cycle.c (after the plant step's)."""
    layouts = [
        "",
        "/* Layouts of the lockstep loop's arrays (read by compiled_lockstep.py), and their offsets. */",
        f'const char hexapod_lockstep_state[] = "{_layout(LOCKSTEP_STATE)}";',
        f'const char hexapod_lockstep_row[] = "{_layout(LOCKSTEP_ROW)}";',
        f'const char hexapod_lockstep_reasons[] = "{" ".join(LOCKSTEP_REASONS)}";',
        f"#define LOCKSTEP_FLIGHT_CAPACITY {FLIGHT_CAPACITY}",
        f"#define LOCKSTEP_FLIGHT_ENTRY {FLIGHT_ENTRY}",
        *_offsets("LOCKSTEP", LOCKSTEP_STATE),
        *_offsets("LOCKSTEP_ROW", LOCKSTEP_ROW),
        *(f"#define LOCKSTEP_REASON_{name.upper()} {code}" for code, name in enumerate(LOCKSTEP_REASONS)),
    ]
    return "\n".join(layouts) + "\n" + TEMPLATE

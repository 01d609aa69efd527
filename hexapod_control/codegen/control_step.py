"""The whole step per joint state in C, appended to the control cycle's C file.

``python -m hexapod_control.codegen`` writes these functions at the end of
``model/generated/control_cycle.c``, after the control cycle (control_cycle.py) and the delay
compensation's core (delay_prediction.py), whose functions they call. control/compiled_step.py
calls them from ControlLoop (control/loop.py); the Python code stays the reference and runs every
step they do not finish:

* ``hexapod_step_intake``: SafetySupervisor.joint_state for a state whose arrays are in joint order:
  the stamp's finiteness and future bound, finite values, the plausibility rows (travel, slider
  separation, speed, motion since the last valid state), the repeated stamp, the stale stamp,
  then the frozen-feedback window, the rate window and the last valid state;
* ``hexapod_step_command``: SafetySupervisor.command while armed and tracking (the state's limits,
  the joint-state rate, the reference's age), DelayCompensatedController.update (the period, the
  measured forward kinematics, the delay estimator, the prediction under the forces in flight, the
  reference carried to the same instant, the wrapped control law of control_cycle.py), the
  supervisor's clamp and its saturation and frozen-feedback windows, and the command in flight;
* ``hexapod_step_safe``: SafetySupervisor.command while it is disarmed or faulted: the ZERO or the
  latched HOLD (set by the Python code in ``memory``), the state's pose, and what the Python loop
  records of such a step (the drives' effort, the command in flight);
* ``hexapod_step_published``: DelayCompensatedController.published.

A step the C code does not finish returns a deferring status and leaves ``memory`` as it was: every
row of the rule table that changes the supervisor's state (a fault latched, a rejected state), every
deferred call of the numeric core, a hold force that cannot be computed, and the frozen-feedback
judgement (once per window, a mass-matrix solve and a message) are the Python code's. ``memory`` holds, in the layout below, the state the Python objects
hold as deques, tuples and arrays (compiled_step.py packs and unpacks it), and each function works on
a copy of it that it writes back only when it finishes.
"""

from __future__ import annotations

from hexapod_control.codegen.control_cycle import _layout, _offsets

# Fixed capacities: the Python windows must fit them (compiled_step.py checks, else runs Python).
RATE_WINDOW = 100  # control/safety.py RATE_WINDOW
PERIOD_WINDOW = 15  # control/stamp_period.py WINDOW
FLIGHT_CAPACITY = 16  # commands in flight: max_delay_periods + 2
WINDOW_HEADER = 3  # count, next slot, last stamp (NaN: none)
SENT_ENTRY = 8  # stamp, lateness, forces (6)

# (name, size): constants packed once per loop.
STEP_SETTINGS = (
    ("max_future_stamp", 1),  # safety.*
    ("max_feedback_age", 1),
    ("plausible_position_margin", 1),
    ("plausible_speed_factor", 1),
    ("plausible_step_margin", 1),
    ("reference_timeout", 1),
    ("max_saturation_time", 1),
    ("frozen_feedback_time", 1),
    ("position_min", 1),  # limits.*
    ("position_max", 1),
    ("min_slider_separation", 1),
    ("speed_max", 1),
    ("force_limit", 1),
    ("rate_min", 1),  # the controller's valid_rates [Hz]
    ("rate_max", 1),
    ("rate_tolerance", 1),  # safety.py RATE_TOLERANCE
    ("rate_known_spacings", 1),  # safety.py RATE_KNOWN_SPACINGS
    ("rate_window", 1),  # safety.py RATE_WINDOW
    ("rate_drop_span", 1),  # safety.py RATE_DROP_SPAN_S
    ("period_window", 1),  # stamp_period.py WINDOW
    ("nominal_period", 1),  # DelayCompensatedController.nominal_period [s]
    ("flight_length", 1),  # the length of its deque of commands in flight
    ("stamp_tolerance", 1),  # delay_compensation.py STAMP_TOLERANCE [periods]
    ("estimate", 1),  # 1: the delay estimator runs
    ("max_delay_periods", 1),
    ("longest_delay", 1),  # DelayCompensatedController.flight.longest: forces kept in flight [periods]
    ("estimator_time_constant", 1),  # [s]
    ("switch_ratio", 1),  # DelayEstimator.SWITCH_RATIO
    ("double_loop", 1),  # 1: the wrapped law is the double loop, 0: computed torque
    ("law_period", 1),  # the wrapped controller's nominal period [s]
    ("longest_period", 1),  # its valid_rates.longest_period [s] (DoubleLoopController.integration_step)
    ("max_reference_position_step", 1),  # safety.*: the step from the last reference
    ("max_reference_angle_step", 1),
    ("hold_damping", 1),  # safety.hold_damping [N*s/m]
    ("hold_force_limit", 1),  # min(safety.hold_force_max, limits.actuator_force_max) [N]
)
# (name, size): the state carried from step to step.
STEP_MEMORY = (
    ("last_stamp", 1),  # SafetySupervisor.last_stamp (-inf before any)
    ("last_valid", 1),  # 1.0 when _last_valid is set
    ("last_valid_stamp", 1),
    ("last_valid_q", 6),
    ("last_valid_qd", 6),
    ("rate", WINDOW_HEADER + 2 * RATE_WINDOW),  # joint_state_period: header, spacings in order, sorted
    ("saturated_since", 1),  # NaN: None
    ("frozen_since", 1),  # NaN: None
    ("frozen_force_sum", 6),
    ("frozen_commands", 1),
    ("period", WINDOW_HEADER + 2 * PERIOD_WINDOW),  # DelayCompensatedController.flight.stamps
    ("sent", 2 + SENT_ENTRY * FLIGHT_CAPACITY),  # _sent: count, next slot, entries
    ("effort_stamp", 1),  # _effort (NaN: None)
    ("effort", 6),
    ("measurement", 1),  # 1.0 when _last_measurement is set
    ("measurement_t", 1),
    ("measurement_q", 6),
    ("measurement_qd", 6),
    ("measurement_phi", 3),
    ("misfits", FLIGHT_CAPACITY),  # DelayEstimator.misfits
    ("delay_periods", 1),
    ("estimate_changes", 1),
    ("prediction", 1),  # 1.0 when .prediction is set
    ("prediction_q", 6),
    ("prediction_qd", 6),
    ("measured_state", 24),  # measured_state's warm start, in the control cycle's state layout
    ("law_state", 24),  # the wrapped controller's warm start and integrator (control cycle state)
    ("updated_at", 1),  # the wrapped controller's _updated_at (NaN: None)
    ("reference_taken", 1),  # 1.0 when a message step took a reference since the memory was packed
    ("reference_t", 1),  # SafetySupervisor.reference: the reference, its stamp and when it was taken
    ("reference", 18),
    ("reference_received", 1),
    # SafetySupervisor.ramp (a SmoothMove) for the steps that read the grid: 1.0 while it runs, its
    # start stamp, duration, start pose, displacement and target pose.
    ("ramp", 1),
    ("ramp_start", 1),
    ("ramp_duration", 1),
    ("ramp_start_pose", 6),
    ("ramp_displacement", 6),
    ("ramp_target", 6),
    # The supervisor's action for a state taken while it is disarmed or faulted (ACTION_* below;
    # ACTION_CONTROL while it tracks), set by the Python code whenever it hands the step over, and the
    # warm start of the forward kinematics that such a state's pose and hold force are computed at.
    ("action", 1),
    ("safe_state", 24),
)
# (name, size): the inputs of one step.
STEP_INPUTS = (
    ("now", 1),
    ("stamp", 1),
    ("q", 6),
    ("qd", 6),
    ("effort_given", 1),  # 1.0: `effort` is the joint state's effort field in joint order
    ("effort", 6),
    ("reference", 18),  # the tracked reference at the stamp: pose, velocity, acceleration
    ("reference_received", 1),
)
# (name, size): what a finished command step gives.
STEP_OUTPUTS = (
    ("forces", 6),
    ("saturated", 6),
    ("pose", 6),  # of the measured q
    ("pose_error", 6),  # reference - pose, angles wrapped
    ("position_error_norm", 1),
    ("orientation_error_norm", 1),
    ("law_status", 1),  # the control cycle's status (ok, saturated, near_singular)
    ("jacobian_conditioning", 1),
    ("constraint_conditioning", 1),
    ("fk_iterations", 1),
    ("fk_residual", 1),
    ("joint_command", 6),
    ("velocity_error", 6),
    ("phi", 3),  # passive angles of the measured q [rad]
    ("cycle_status", 1),  # the numeric core's status when a step defers on it
    ("intake", 1),  # hexapod_step_message: the intake's status of the message it left to Python
)
# Return values: the first three finish the step, the others leave it (memory untouched) to Python.
STEP_STATUSES = (
    "taken",
    "repeated",
    "answered",  # CONTROL, or the action of a disarmed or faulted supervisor (hexapod_step_safe)
    "invalid",  # a row of the invalid joint state
    "stale",
    "state_limits",  # the measured state outside the travel, the separation or the speed limit
    "rate",  # the joint-state rate unknown or outside valid_rates
    "reference_stale",
    "measure",  # the measured forward kinematics (cycle_status says why)
    "applied_force",
    "predict",
    "law",
    "saturation",  # held at the force limit for longer than max_saturation_time
    "frozen_window",  # a frozen-feedback window ends: the Python code judges it
    "reference",  # the reference at the stamp is not finite, or too far from the last: Python faults
    "layout",  # the message's bytes are not in the learned layout: Python reads it
    "grid",  # the reference grid holds no knots around the stamp: Python samples them
    "hold_force",  # the hold force is not computable or not finite: Python escalates to ZERO
)
# hexapod_step_message's description of the joint states' bytes (ros/wire.py learns it), as int64:
# the message size, the offsets of the stamp and of the positions, velocities and efforts (-1: no
# effort field), the offset of the six forces in the command's bytes, then the number of runs of
# layout-fixing bytes and each run's (start, stop).
WIRE_FIELDS = ("size", "stamp", "position", "velocity", "effort", "command", "runs")
WIRE_RUNS = 64  # runs at most: a layout with more is read by the Python code
# The reference grid (control/reference_grid.py): a header, then knots of pose, velocity, acceleration.
GRID_FIELDS = ("origin", "period", "first", "count")  # caller-clock t of the source's t = 0; [s]; knot indices
GRID_KNOT = 18
# The memory's "action": what a state taken in hexapod_step_safe is answered with.
ACTIONS = ("control", "zero", "hold")

TEMPLATE = r"""
/* ------------------------------------------------------------------------------ the whole step */
/* SafetySupervisor.joint_state and .command around DelayCompensatedController.update
 * (codegen/control_step.py). Each function works on a copy of `memory` and writes it back only when
 * it finishes (a status below STEP_FINISHED); every other status leaves the step to the Python code.
 *
 *   int hexapod_step_intake(const double inputs[...], double memory[...], const double step_settings[...])
 *   int hexapod_step_command(const double inputs[...], double memory[...], const double step_settings[...],
 *                            const double cycle_settings[...], const double drives[25],
 *                            const double parameters[...], double out[...])
 *   int hexapod_step_published(double memory[...], const double step_settings[...], double stamp, double when)
 */
#define STEP_FINISHED 3

/* A window of stamp spacings (StampPeriod): count, next slot, last stamp, the spacings in arrival
 * order (a ring) and the same sorted (for the median). */
static double step_window_median(const double *block, int window, double fallback)
{
    const int count = (int)block[0];
    const double *sorted = block + WINDOW_HEADER + window;
    if (count == 0) {
        return fallback;
    }
    const int middle = count / 2;
    return count % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2.0;
}

static void step_window_add(double *block, int window, double stamp)
{
    const double last = block[2];
    if (!isnan(last) && stamp > last) {
        const double spacing = stamp - last;
        int count = (int)block[0], next = (int)block[1];
        double *ring = block + WINDOW_HEADER, *sorted = block + WINDOW_HEADER + window;
        if (count == window) { /* the oldest leaves */
            const double oldest = ring[next];
            int at = 0;
            while (at < count - 1 && sorted[at] != oldest) {
                ++at;
            }
            memmove(sorted + at, sorted + at + 1, (size_t)(count - 1 - at) * sizeof(double));
            --count;
        }
        ring[next] = spacing;
        int at = count;
        while (at > 0 && sorted[at - 1] > spacing) {
            sorted[at] = sorted[at - 1];
            --at;
        }
        sorted[at] = spacing;
        block[0] = count + 1;
        block[1] = (next + 1) % window;
    }
    block[2] = stamp;
}

/* The newest spacings longer than `slowest`, in a row (StampPeriod.slow_run): their number, and
 * their sum newest first in `span`. */
static int step_window_slow_run(const double *block, int window, double slowest, double *span)
{
    const int count = (int)block[0], next = (int)block[1];
    const double *ring = block + WINDOW_HEADER;
    int run = 0;
    *span = 0.0;
    for (int k = 1; k <= count; ++k) {
        const double spacing = ring[(next - k + window) % window];
        if (!(spacing > slowest)) {
            break;
        }
        *span = *span + spacing;
        run = run + 1;
    }
    return run;
}

/* The commands in flight (DelayCompensatedController.flight.sent): count, next slot, entries of
 * (stamp, lateness, forces), `length` of them at most (the deque's maxlen). */
static const double STEP_ZERO_FORCES[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};

static double *step_sent_entry(double *sent, int length, int back)
{
    const int next = (int)sent[1];
    return sent + 2 + SENT_ENTRY * ((next - 1 - back + 2 * length) % length);
}

/* DelayCompensatedController._in_flight: the command acting at t under a delay of `delay` periods. */
static const double *step_in_flight(double *sent, int length, double t, double period, int delay, double tolerance)
{
    const int count = (int)sent[0];
    for (int back = 0; back < count; ++back) {
        const double *entry = step_sent_entry(sent, length, back);
        if (entry[0] + ((double)(delay + (int)entry[1]) - tolerance) * period <= t) {
            return entry + 2;
        }
    }
    return STEP_ZERO_FORCES;
}

/* DelayCompensatedController.commanded: the forces sent for the state stamped t, clamped. */
static void step_commanded(double *sent, int length, double t, const double *forces, double limit)
{
    int count = (int)sent[0], next = (int)sent[1];
    if (count > 0 && step_sent_entry(sent, length, 0)[0] == t) {
        --count;
        next = (next - 1 + length) % length;
    }
    double *entry = sent + 2 + SENT_ENTRY * next;
    entry[0] = t;
    entry[1] = 0.0;
    for (int k = 0; k < N_ACTUATORS; ++k) {
        entry[2 + k] = fmin(fmax(forces[k], -limit), limit);
    }
    sent[0] = count < length ? count + 1 : length;
    sent[1] = (next + 1) % length;
}

int hexapod_step_intake(const double *inputs, double *memory, const double *settings)
{
    const double now = inputs[INPUT_NOW], stamp = inputs[INPUT_STAMP];
    const double *q = inputs + INPUT_Q, *qd = inputs + INPUT_QD;
    if (!isfinite(stamp) || stamp - now > settings[STEP_MAX_FUTURE_STAMP] || !cycle_all_finite(q, 6) ||
        !cycle_all_finite(qd, 6)) {
        return STEP_STATUS_INVALID;
    }
    /* SafetySupervisor._check_plausible */
    const double margin = settings[STEP_PLAUSIBLE_POSITION_MARGIN];
    const double low = settings[STEP_POSITION_MIN] - margin, high = settings[STEP_POSITION_MAX] + margin;
    const double plausible_speed = settings[STEP_PLAUSIBLE_SPEED_FACTOR] * settings[STEP_SPEED_MAX];
    for (int k = 0; k < N_ACTUATORS; ++k) {
        if (q[k] < low || q[k] > high || fabs(qd[k]) > plausible_speed) {
            return STEP_STATUS_INVALID;
        }
    }
    for (int side = 0; side < 3; ++side) {
        if (q[2 * side] + q[2 * side + 1] < settings[STEP_MIN_SLIDER_SEPARATION] - margin) {
            return STEP_STATUS_INVALID;
        }
    }
    const double last_stamp = memory[MEMORY_LAST_STAMP];
    const int has_last_valid = memory[MEMORY_LAST_VALID] != 0.0;
    if (stamp > last_stamp && has_last_valid) { /* _check_motion */
        const double bound = plausible_speed * (stamp - memory[MEMORY_LAST_VALID_STAMP]) + settings[STEP_PLAUSIBLE_STEP_MARGIN];
        for (int k = 0; k < N_ACTUATORS; ++k) {
            if (fabs(q[k] - memory[MEMORY_LAST_VALID_Q + k]) > bound) {
                return STEP_STATUS_INVALID;
            }
        }
    }
    if (stamp <= last_stamp) {
        return STEP_STATUS_REPEATED;
    }
    if (now - stamp > settings[STEP_MAX_FEEDBACK_AGE]) {
        return STEP_STATUS_STALE;
    }
    int unchanged = has_last_valid;
    for (int k = 0; k < N_ACTUATORS && unchanged; ++k) {
        unchanged = q[k] == memory[MEMORY_LAST_VALID_Q + k] && qd[k] == memory[MEMORY_LAST_VALID_QD + k];
    }
    if (!unchanged || isnan(memory[MEMORY_FROZEN_SINCE])) { /* _restart_frozen_window */
        memory[MEMORY_FROZEN_SINCE] = unchanged ? memory[MEMORY_LAST_VALID_STAMP] : NAN;
        memset(memory + MEMORY_FROZEN_FORCE_SUM, 0, 6 * sizeof(double));
        memory[MEMORY_FROZEN_COMMANDS] = 0.0;
    }
    memory[MEMORY_LAST_STAMP] = stamp;
    step_window_add(memory + MEMORY_RATE, (int)settings[STEP_RATE_WINDOW], stamp);
    memory[MEMORY_LAST_VALID] = 1.0;
    memory[MEMORY_LAST_VALID_STAMP] = stamp;
    memcpy(memory + MEMORY_LAST_VALID_Q, q, 6 * sizeof(double));
    memcpy(memory + MEMORY_LAST_VALID_QD, qd, 6 * sizeof(double));
    return STEP_STATUS_TAKEN;
}

/* SafetySupervisor._rate_problem, and its "not known yet": 0 when the rate allows control. */
static int step_rate_problem(const double *memory, const double *settings)
{
    const int window = (int)settings[STEP_RATE_WINDOW];
    const double *rate = memory + MEMORY_RATE;
    const int known = (int)settings[STEP_RATE_KNOWN_SPACINGS];
    if ((int)rate[0] < known) {
        return 1;
    }
    const double tolerance = settings[STEP_RATE_TOLERANCE];
    const double measured = 1.0 / step_window_median(rate, window, NAN);
    if (!(settings[STEP_RATE_MIN] * (1.0 - tolerance) <= measured && measured <= settings[STEP_RATE_MAX] * (1.0 + tolerance))) {
        return 1;
    }
    const double slowest = 1.0 / (settings[STEP_RATE_MIN] * (1.0 - tolerance));
    double span = 0.0;
    const int run = step_window_slow_run(rate, window, slowest, &span);
    return run >= known && span >= settings[STEP_RATE_DROP_SPAN] * (1.0 - tolerance);
}

/* DelayCompensatedController._estimate, with the C applied force (or the drives' effort). */
static int step_estimate(double *memory, const double *settings, const double *cycle_settings, const double *drives,
                         const double *parameters, double t, const double *q, const double *qd, const double *phi,
                         double period, int *cycle_status)
{
    const int had = memory[MEMORY_MEASUREMENT] != 0.0;
    double t0 = memory[MEMORY_MEASUREMENT_T], q0[6], qd0[6], phi0[3];
    memcpy(q0, memory + MEMORY_MEASUREMENT_Q, sizeof q0);
    memcpy(qd0, memory + MEMORY_MEASUREMENT_QD, sizeof qd0);
    memcpy(phi0, memory + MEMORY_MEASUREMENT_PHI, sizeof phi0);
    memory[MEMORY_MEASUREMENT] = 1.0;
    memory[MEMORY_MEASUREMENT_T] = t;
    memcpy(memory + MEMORY_MEASUREMENT_Q, q, 6 * sizeof(double));
    memcpy(memory + MEMORY_MEASUREMENT_QD, qd, 6 * sizeof(double));
    memcpy(memory + MEMORY_MEASUREMENT_PHI, phi, 3 * sizeof(double));
    const double tolerance = settings[STEP_STAMP_TOLERANCE];
    if (!had || !(0.0 < t - t0 && t - t0 < (1.0 + tolerance) * period)) {
        return STEP_STATUS_ANSWERED;
    }
    double applied[6];
    if (memory[MEMORY_EFFORT_STAMP] == t) {
        memcpy(applied, memory + MEMORY_EFFORT, sizeof applied);
    } else {
        *cycle_status = hexapod_applied_force(q0, qd0, phi0, qd, t - t0, drives, cycle_settings, parameters, applied);
        if (*cycle_status != STATUS_OK) {
            return STEP_STATUS_APPLIED_FORCE;
        }
    }
    const int length = (int)settings[STEP_FLIGHT_LENGTH], hypotheses = (int)settings[STEP_MAX_DELAY_PERIODS] + 1;
    const double forgetting = exp(-period / settings[STEP_ESTIMATOR_TIME_CONSTANT]);
    double *misfits = memory + MEMORY_MISFITS;
    for (int delay = 0; delay < hypotheses; ++delay) {
        const double *command = step_in_flight(memory + MEMORY_SENT, length, t0, period, delay, tolerance);
        double misfit = 0.0;
        for (int k = 0; k < N_ACTUATORS; ++k) {
            const double difference = applied[k] - command[k];
            misfit += difference * difference;
        }
        misfits[delay] = forgetting * misfits[delay] + (1.0 - forgetting) * misfit;
    }
    int best = 0;
    for (int delay = 1; delay < hypotheses; ++delay) {
        if (misfits[delay] < misfits[best]) {
            best = delay;
        }
    }
    if (misfits[best] < settings[STEP_SWITCH_RATIO] * misfits[(int)memory[MEMORY_DELAY_PERIODS]]) {
        memory[MEMORY_DELAY_PERIODS] = best;
        memory[MEMORY_ESTIMATE_CHANGES] += 1.0;
    }
    return STEP_STATUS_ANSWERED;
}

int hexapod_step_command(const double *inputs, double *memory, const double *settings, const double *cycle_settings,
                         const double *drives, const double *parameters, double *out)
{
    double work[MEMORY_SIZE];
    memcpy(work, memory, sizeof work);
    const double now = inputs[INPUT_NOW], t = inputs[INPUT_STAMP];
    const double *q = inputs + INPUT_Q, *qd = inputs + INPUT_QD, *reference = inputs + INPUT_REFERENCE;
    int cycle_status = STATUS_OK;
    /* SafetySupervisor.command: the state's limits (_state_problem), the rate, the reference's age. */
    for (int k = 0; k < N_ACTUATORS; ++k) {
        if (!(settings[STEP_POSITION_MIN] <= q[k] && q[k] <= settings[STEP_POSITION_MAX]) ||
            fabs(qd[k]) > settings[STEP_SPEED_MAX]) {
            return STEP_STATUS_STATE_LIMITS;
        }
    }
    for (int side = 0; side < 3; ++side) {
        if (q[2 * side] + q[2 * side + 1] < settings[STEP_MIN_SLIDER_SEPARATION]) {
            return STEP_STATUS_STATE_LIMITS;
        }
    }
    if (now - t > settings[STEP_MAX_FEEDBACK_AGE]) {
        return STEP_STATUS_STALE;
    }
    if (step_rate_problem(work, settings)) {
        return STEP_STATUS_RATE;
    }
    if (now - inputs[INPUT_REFERENCE_RECEIVED] > settings[STEP_REFERENCE_TIMEOUT]) {
        return STEP_STATUS_REFERENCE_STALE;
    }
    if (!cycle_all_finite(reference, 18)) {
        return STEP_STATUS_LAW; /* the wrapped controller's invalid input */
    }
    if (inputs[INPUT_EFFORT_GIVEN] != 0.0 && cycle_all_finite(inputs + INPUT_EFFORT, 6)) { /* measured_effort */
        work[MEMORY_EFFORT_STAMP] = t;
        memcpy(work + MEMORY_EFFORT, inputs + INPUT_EFFORT, 6 * sizeof(double));
    }

    /* DelayCompensatedController.update */
    double *stamps = work + MEMORY_PERIOD;
    const int period_window = (int)settings[STEP_PERIOD_WINDOW];
    step_window_add(stamps, period_window, t);
    const double period = step_window_median(stamps, period_window, settings[STEP_NOMINAL_PERIOD]);
    double measured[MEASURED_SIZE];
    cycle_status = hexapod_measure(q, work + MEMORY_MEASURED_STATE, cycle_settings, measured);
    if (cycle_status != STATUS_OK) {
        out[OUTPUT_CYCLE_STATUS] = cycle_status;
        return STEP_STATUS_MEASURE;
    }
    const double *phi = measured + MEASURED_PHI, *pose = measured + MEASURED_POSE;
    if (settings[STEP_ESTIMATE] != 0.0) {
        const int status = step_estimate(work, settings, cycle_settings, drives, parameters, t, q, qd, phi, period,
                                         &cycle_status);
        if (status != STEP_STATUS_ANSWERED) {
            out[OUTPUT_CYCLE_STATUS] = cycle_status;
            return status;
        }
    }
    const int delay = (int)work[MEMORY_DELAY_PERIODS], length = (int)settings[STEP_FLIGHT_LENGTH];
    /* DelayCompensatedController._age_periods: the periods the state is old when answered */
    const double age = fmin(fmax(floor((inputs[INPUT_NOW] - t) / period), 0.0), settings[STEP_LONGEST_DELAY] - delay);
    const int steps_ahead = delay + (int)age;
    const double horizon = steps_ahead * period, tolerance = settings[STEP_STAMP_TOLERANCE];
    double in_flight[6 * FLIGHT_CAPACITY], predicted[PREDICTED_SIZE];
    for (int step = 0; step < steps_ahead; ++step) {
        memcpy(in_flight + 6 * step, step_in_flight(work + MEMORY_SENT, length, t + step * period, period, delay, tolerance),
               6 * sizeof(double));
    }
    cycle_status = hexapod_predict(q, qd, phi, in_flight, steps_ahead, period, drives, cycle_settings, parameters, predicted);
    if (cycle_status != STATUS_OK) {
        out[OUTPUT_CYCLE_STATUS] = cycle_status;
        return STEP_STATUS_PREDICT;
    }
    work[MEMORY_PREDICTION] = 1.0;
    memcpy(work + MEMORY_PREDICTION_Q, predicted + PREDICTED_Q, 6 * sizeof(double));
    memcpy(work + MEMORY_PREDICTION_QD, predicted + PREDICTED_QD, 6 * sizeof(double));
    double ahead[18]; /* extrapolated_reference */
    for (int k = 0; k < 6; ++k) {
        const double velocity = reference[REFERENCE_VELOCITY + k], acceleration = reference[REFERENCE_ACCELERATION + k];
        ahead[REFERENCE_POSE + k] = reference[REFERENCE_POSE + k] + horizon * velocity + 0.5 * horizon * horizon * acceleration;
        ahead[REFERENCE_VELOCITY + k] = velocity + horizon * acceleration;
        ahead[REFERENCE_ACCELERATION + k] = acceleration;
    }
    double law[OUT_SIZE];
    const int double_loop = settings[STEP_DOUBLE_LOOP] != 0.0;
    const double updated_at = work[MEMORY_UPDATED_AT], law_period = settings[STEP_LAW_PERIOD];
    /* OperationalSpaceController.feedback_scale */
    const double scale = (isnan(updated_at) || !(t - updated_at > law_period)) ? 1.0 : law_period / (t - updated_at);
    if (double_loop) {
        /* DoubleLoopController.integration_step */
        const double step = isnan(updated_at) ? law_period : fmin(fmax(t - updated_at, 0.0), settings[STEP_LONGEST_PERIOD]);
        cycle_status = hexapod_cycle_double_loop(predicted + PREDICTED_Q, predicted + PREDICTED_QD, ahead, step, scale,
                                                 work + MEMORY_LAW_STATE, cycle_settings, parameters, law);
    } else {
        cycle_status = hexapod_cycle_computed_torque(predicted + PREDICTED_Q, predicted + PREDICTED_QD, ahead,
                                                     law_period, scale, work + MEMORY_LAW_STATE, cycle_settings,
                                                     parameters, law);
    }
    if (cycle_status > STATUS_NEAR_SINGULAR) {
        out[OUTPUT_CYCLE_STATUS] = cycle_status;
        return STEP_STATUS_LAW;
    }
    work[MEMORY_UPDATED_AT] = isnan(updated_at) ? t : fmax(updated_at, t);
    /* The supervisor's clamp (the law clamped already) and the saturation and frozen-feedback rows. */
    const double limit = settings[STEP_FORCE_LIMIT];
    double forces[6], saturated[6];
    int any_saturated = 0;
    for (int k = 0; k < N_ACTUATORS; ++k) {
        const double force = law[OUT_FORCES + k];
        saturated[k] = (law[OUT_SATURATED + k] != 0.0 || fabs(force) > limit) ? 1.0 : 0.0;
        any_saturated |= saturated[k] != 0.0;
        forces[k] = fmin(fmax(force, -limit), limit);
    }
    if (any_saturated) {
        if (isnan(work[MEMORY_SATURATED_SINCE])) {
            work[MEMORY_SATURATED_SINCE] = t;
        } else if (t - work[MEMORY_SATURATED_SINCE] > settings[STEP_MAX_SATURATION_TIME]) {
            return STEP_STATUS_SATURATION;
        }
    } else {
        work[MEMORY_SATURATED_SINCE] = NAN;
    }
    if (!isnan(work[MEMORY_FROZEN_SINCE])) {
        for (int k = 0; k < N_ACTUATORS; ++k) {
            work[MEMORY_FROZEN_FORCE_SUM + k] += forces[k];
        }
        work[MEMORY_FROZEN_COMMANDS] += 1.0;
        if (!(t - work[MEMORY_FROZEN_SINCE] < settings[STEP_FROZEN_FEEDBACK_TIME])) {
            return STEP_STATUS_FROZEN_WINDOW;
        }
    }
    step_commanded(work + MEMORY_SENT, length, t, forces, limit);

    memcpy(out + OUTPUT_FORCES, forces, sizeof forces);
    memcpy(out + OUTPUT_SATURATED, saturated, sizeof saturated);
    double *pose_error = out + OUTPUT_POSE_ERROR;
    for (int k = 0; k < 6; ++k) {
        out[OUTPUT_POSE + k] = pose[k];
        pose_error[k] = reference[REFERENCE_POSE + k] - pose[k];
    }
    for (int k = 3; k < 6; ++k) {
        pose_error[k] = M_PI - cycle_remainder(M_PI - pose_error[k], 2.0 * M_PI);
    }
    out[OUTPUT_POSITION_ERROR_NORM] =
        sqrt(pose_error[0] * pose_error[0] + pose_error[1] * pose_error[1] + pose_error[2] * pose_error[2]);
    out[OUTPUT_ORIENTATION_ERROR_NORM] =
        sqrt(pose_error[3] * pose_error[3] + pose_error[4] * pose_error[4] + pose_error[5] * pose_error[5]);
    out[OUTPUT_LAW_STATUS] = cycle_status;
    out[OUTPUT_JACOBIAN_CONDITIONING] = law[OUT_JACOBIAN_CONDITIONING];
    out[OUTPUT_CONSTRAINT_CONDITIONING] = law[OUT_CONSTRAINT_CONDITIONING];
    out[OUTPUT_FK_ITERATIONS] = law[OUT_FK_ITERATIONS];
    out[OUTPUT_FK_RESIDUAL] = law[OUT_FK_RESIDUAL];
    memcpy(out + OUTPUT_JOINT_COMMAND, law + OUT_JOINT_COMMAND, 6 * sizeof(double));
    memcpy(out + OUTPUT_VELOCITY_ERROR, law + OUT_VELOCITY_ERROR, 6 * sizeof(double));
    memcpy(out + OUTPUT_PHI, phi, 3 * sizeof(double));
    out[OUTPUT_CYCLE_STATUS] = STATUS_OK;
    memcpy(memory, work, sizeof work);
    return STEP_STATUS_ANSWERED;
}

int hexapod_step_published(double *memory, const double *settings, double stamp, double when)
{
    const int length = (int)settings[STEP_FLIGHT_LENGTH];
    double *sent = memory + MEMORY_SENT;
    if ((int)sent[0] == 0 || step_sent_entry(sent, length, 0)[0] != stamp || !isfinite(when)) {
        return 0;
    }
    const double period = step_window_median(memory + MEMORY_PERIOD, (int)settings[STEP_PERIOD_WINDOW],
                                             settings[STEP_NOMINAL_PERIOD]);
    step_sent_entry(sent, length, 0)[1] = fmax(0.0, floor((when - stamp) / period));
    return 1;
}

int reduced_gravity_term(const double *q, const double *phi, const double *parameters, double *out);

/* SafetySupervisor.command for a state taken while the supervisor is disarmed or faulted, with the
 * action the Python code set in memory[MEMORY_ACTION]: ZERO, or HOLD (_act: g_bar(q) - hold_damping q_dot,
 * clamped to +-hold_force_limit); the pose of the state (the outputs' pose and phi); and what the
 * Python loop records of such a step: the drives' effort (measured_effort) and the command in flight
 * (commanded). A pose or a hold force that cannot be computed leaves the step to the Python code,
 * which escalates a HOLD to ZERO. */
int hexapod_step_safe(const double *inputs, double *memory, const double *settings, const double *cycle_settings,
                      const double *parameters, double *out)
{
    const double t = inputs[INPUT_STAMP];
    const double *q = inputs + INPUT_Q, *qd = inputs + INPUT_QD;
    double state[STATE_SIZE], measured[MEASURED_SIZE];
    memcpy(state, memory + MEMORY_SAFE_STATE, sizeof state);
    const int cycle_status = hexapod_measure(q, state, cycle_settings, measured);
    if (cycle_status != STATUS_OK) {
        out[OUTPUT_CYCLE_STATUS] = cycle_status;
        return STEP_STATUS_MEASURE;
    }
    const double *phi = measured + MEASURED_PHI;
    double forces[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, saturated[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    if (memory[MEMORY_ACTION] == ACTION_HOLD) {
        double gravity[6];
        if (reduced_gravity_term(q, phi, parameters, gravity) != 0) {
            return STEP_STATUS_HOLD_FORCE;
        }
        const double limit = settings[STEP_HOLD_FORCE_LIMIT];
        for (int k = 0; k < N_ACTUATORS; ++k) {
            const double force = gravity[k] - settings[STEP_HOLD_DAMPING] * qd[k];
            if (!isfinite(force)) {
                return STEP_STATUS_HOLD_FORCE;
            }
            saturated[k] = fabs(force) > limit ? 1.0 : 0.0;
            forces[k] = fmin(fmax(force, -limit), limit);
        }
    }
    if (inputs[INPUT_EFFORT_GIVEN] != 0.0 && cycle_all_finite(inputs + INPUT_EFFORT, 6)) { /* measured_effort */
        memory[MEMORY_EFFORT_STAMP] = t;
        memcpy(memory + MEMORY_EFFORT, inputs + INPUT_EFFORT, 6 * sizeof(double));
    }
    step_commanded(memory + MEMORY_SENT, (int)settings[STEP_FLIGHT_LENGTH], t, forces, settings[STEP_FORCE_LIMIT]);
    memcpy(memory + MEMORY_SAFE_STATE, state, sizeof state);
    memcpy(out + OUTPUT_FORCES, forces, sizeof forces);
    memcpy(out + OUTPUT_SATURATED, saturated, sizeof saturated);
    memcpy(out + OUTPUT_POSE, measured + MEASURED_POSE, 6 * sizeof(double));
    memcpy(out + OUTPUT_PHI, phi, 3 * sizeof(double));
    out[OUTPUT_LAW_STATUS] = STATUS_OK; /* no law ran: nothing for its status to report */
    out[OUTPUT_CYCLE_STATUS] = STATUS_OK;
    return STEP_STATUS_ANSWERED;
}

/* ------------------------------------------------------------------------------ one message */
/* hexapod_step_message: a serialized joint state taken (answer = 0: a superseded one, judged) or
 * answered, from its bytes to the command's, with the reference read off the grid at its stamp.
 *
 *   int hexapod_step_message(void *const arrays[11], const unsigned char *data, long size, int answer)
 *
 * arrays: inputs, memory, step settings, cycle settings, drives, parameters, out (as for
 * hexapod_step_command), wire (int64, WIRE_* below), the learned message's bytes, the reference
 * grid (GRID_* below) and the command's bytes, whose six forces it writes when it answers. The
 * caller sets inputs[INPUT_NOW]. "layout" and "grid" leave everything untouched; after the intake
 * took the state (out[OUTPUT_INTAKE]), every status but "answered" leaves the rest of the step to
 * the Python code. */

/* The stamp and the arrays of a message in the learned layout, into the inputs; 0 when its size or
 * one of its layout-fixing bytes differ (other names, another frame_id, ...). */
static int step_read_message(const unsigned char *data, long size, const int64_t *wire, const unsigned char *learned,
                             double *inputs)
{
    const int64_t runs = wire[WIRE_RUNS];
    if (size != wire[WIRE_SIZE] || runs > WIRE_RUNS_CAPACITY) {
        return 0;
    }
    for (int64_t run = 0; run < runs; ++run) {
        const int64_t start = wire[WIRE_HEADER + 2 * run], stop = wire[WIRE_HEADER + 2 * run + 1];
        if (memcmp(data + start, learned + start, (size_t)(stop - start)) != 0) {
            return 0;
        }
    }
    int32_t sec;
    uint32_t nanosec;
    memcpy(&sec, data + wire[WIRE_STAMP], sizeof sec);
    memcpy(&nanosec, data + wire[WIRE_STAMP] + 4, sizeof nanosec);
    inputs[INPUT_STAMP] = (double)sec + 1e-9 * (double)nanosec; /* time_from_stamp */
    memcpy(inputs + INPUT_Q, data + wire[WIRE_POSITION], 6 * sizeof(double));
    memcpy(inputs + INPUT_QD, data + wire[WIRE_VELOCITY], 6 * sizeof(double));
    if (wire[WIRE_EFFORT] >= 0) {
        inputs[INPUT_EFFORT_GIVEN] = 1.0;
        memcpy(inputs + INPUT_EFFORT, data + wire[WIRE_EFFORT], 6 * sizeof(double));
    } else {
        inputs[INPUT_EFFORT_GIVEN] = 0.0;
        memset(inputs + INPUT_EFFORT, 0, 6 * sizeof(double));
    }
    return 1;
}

/* ReferenceGrid.sample (control/reference_grid.py, hermite_weights), the same sums in the same order;
 * 0 when the grid does not hold the knots around t. */
static int step_grid_reference(const double *grid, double t, double *reference)
{
    const double h = grid[GRID_PERIOD], position = (t - grid[GRID_ORIGIN]) / h;
    const double k = floor(position), s = position - k, first = grid[GRID_FIRST];
    if (!(k >= first && k + 1.0 < first + grid[GRID_COUNT])) {
        return 0;
    }
    const double *p0 = grid + GRID_HEADER + (long)(k - first) * GRID_KNOT, *p1 = p0 + GRID_KNOT;
    const double s2 = s * s, s3 = s2 * s, s4 = s3 * s, s5 = s4 * s, h2 = h * h;
    const double weights[3][5] = {
        {(s - 6.0 * s3 + 8.0 * s4 - 3.0 * s5) * h, 0.5 * (s2 - 3.0 * s3 + 3.0 * s4 - s5) * h2,
         0.5 * (s3 - 2.0 * s4 + s5) * h2, (-4.0 * s3 + 7.0 * s4 - 3.0 * s5) * h, 10.0 * s3 - 15.0 * s4 + 6.0 * s5},
        {1.0 - 18.0 * s2 + 32.0 * s3 - 15.0 * s4, 0.5 * (2.0 * s - 9.0 * s2 + 12.0 * s3 - 5.0 * s4) * h,
         0.5 * (3.0 * s2 - 8.0 * s3 + 5.0 * s4) * h, -12.0 * s2 + 28.0 * s3 - 15.0 * s4,
         (30.0 * s2 - 60.0 * s3 + 30.0 * s4) / h},
        {(-36.0 * s + 96.0 * s2 - 60.0 * s3) / h, 0.5 * (2.0 - 18.0 * s + 36.0 * s2 - 20.0 * s3),
         0.5 * (6.0 * s - 24.0 * s2 + 20.0 * s3), (-24.0 * s + 84.0 * s2 - 60.0 * s3) / h,
         (60.0 * s - 180.0 * s2 + 120.0 * s3) / h2},
    };
    for (int part = 0; part < 3; ++part) {
        const double *w = weights[part];
        for (int i = 0; i < 6; ++i) {
            const double change = p1[i] - p0[i];
            const double value = w[0] * p0[6 + i] + w[1] * p0[12 + i] + w[2] * p1[12 + i] + w[3] * p1[6 + i] + w[4] * change;
            reference[6 * part + i] = part == 0 ? p0[i] + value : value;
        }
    }
    return 1;
}

/* SafetySupervisor.validated_reference while armed: finite, and a step from the last reference
 * within max_reference_position_step and max_reference_angle_step (_step_problem). */
static int step_reference_problem(const double *reference, double t, const double *last, const double *settings)
{
    if (!isfinite(t) || !cycle_all_finite(reference, 18)) {
        return 1;
    }
    double step[6];
    for (int k = 0; k < 6; ++k) {
        step[k] = reference[k] - last[k];
    }
    for (int k = 3; k < 6; ++k) {
        step[k] = M_PI - cycle_remainder(M_PI - step[k], 2.0 * M_PI); /* wrap_angle_float */
    }
    const double position = sqrt(step[0] * step[0] + step[1] * step[1] + step[2] * step[2]);
    const double angle = sqrt(step[3] * step[3] + step[4] * step[4] + step[5] * step[5]);
    return position > settings[STEP_MAX_REFERENCE_POSITION_STEP] || angle > settings[STEP_MAX_REFERENCE_ANGLE_STEP];
}

/* SafetySupervisor.tracked_reference: the reference plus the arming ramp's offset while it runs
 * (SmoothMove.sample, _quintic); 0 when the ramp has ended at t (the supervisor then drops it). */
static int step_ramp(const double *memory, double t, double *reference)
{
    const double duration = memory[MEMORY_RAMP_DURATION];
    if (t >= memory[MEMORY_RAMP_START] + duration) {
        return 0;
    }
    const double u = (t - memory[MEMORY_RAMP_START]) / duration;
    double sigma = 0.0, dsigma = 0.0, ddsigma = 0.0;
    if (u >= 1.0) {
        sigma = 1.0;
    } else if (u > 0.0) {
        sigma = pow(u, 3.0) * (10.0 - 15.0 * u + 6.0 * u * u);
        dsigma = 30.0 * u * u * pow(1.0 - u, 2.0);
        ddsigma = 60.0 * u * (1.0 - u) * (1.0 - 2.0 * u);
    }
    const double rate = dsigma / duration, curvature = ddsigma / pow(duration, 2.0);
    for (int k = 0; k < 6; ++k) {
        const double displacement = memory[MEMORY_RAMP_DISPLACEMENT + k];
        const double pose = memory[MEMORY_RAMP_START_POSE + k] + sigma * displacement;
        reference[k] = reference[k] + (pose - memory[MEMORY_RAMP_TARGET + k]);
        reference[6 + k] = reference[6 + k] + rate * displacement;
        reference[12 + k] = reference[12 + k] + curvature * displacement;
    }
    return 1;
}

/* The step of the joint state in the inputs (its clock, stamp, arrays and effort), as
 * hexapod_step_message after reading the bytes: taken (answer = 0), or answered with the memory's
 * action, the grid's reference at its stamp taken as the Python loop takes its player's sample of
 * each answered state: tracked with the arming ramp's offset while it runs (CONTROL), or only taken
 * (the ZERO or HOLD of hexapod_step_safe). The inputs keep the grid's reference. Shared with the
 * compiled lockstep loop (codegen/lockstep.py). */
static int step_inputs(void *const *arrays, int answer)
{
    double *inputs = arrays[0], *memory = arrays[1], *out = arrays[6];
    const double *settings = arrays[2], *grid = arrays[9];
    const double now = inputs[INPUT_NOW], t = inputs[INPUT_STAMP];
    double reference[18];
    if (answer && !step_grid_reference(grid, t, reference)) {
        return STEP_STATUS_GRID;
    }
    const int intake = hexapod_step_intake(inputs, memory, settings);
    out[OUTPUT_INTAKE] = intake;
    if (!answer || intake != STEP_STATUS_TAKEN) {
        return intake;
    }
    int status;
    if (memory[MEMORY_ACTION] != ACTION_CONTROL) {
        /* validated_reference while disarmed or faulted checks finiteness only */
        if (!cycle_all_finite(reference, 18)) {
            return STEP_STATUS_REFERENCE;
        }
        memcpy(inputs + INPUT_REFERENCE, reference, sizeof reference);
        status = hexapod_step_safe(inputs, memory, settings, arrays[3], arrays[5], out);
        if (status != STEP_STATUS_ANSWERED) {
            return status;
        }
    } else {
        if (step_reference_problem(reference, t, memory + MEMORY_REFERENCE, settings)) {
            return STEP_STATUS_REFERENCE;
        }
        memcpy(inputs + INPUT_REFERENCE, reference, sizeof reference); /* tracked, for the command only */
        const int ramp = memory[MEMORY_RAMP] != 0.0 && step_ramp(memory, t, inputs + INPUT_REFERENCE);
        inputs[INPUT_REFERENCE_RECEIVED] = now;
        status = hexapod_step_command(inputs, memory, settings, arrays[3], arrays[4], arrays[5], out);
        memcpy(inputs + INPUT_REFERENCE, reference, sizeof reference);
        if (status != STEP_STATUS_ANSWERED) {
            return status;
        }
        memory[MEMORY_RAMP] = ramp;
    }
    memory[MEMORY_REFERENCE_TAKEN] = 1.0;
    memory[MEMORY_REFERENCE_T] = t;
    memcpy(memory + MEMORY_REFERENCE, reference, sizeof reference);
    memory[MEMORY_REFERENCE_RECEIVED] = now;
    return STEP_STATUS_ANSWERED;
}

int hexapod_step_message(void *const *arrays, const unsigned char *data, long size, int answer)
{
    const int64_t *wire = arrays[7];
    if (!step_read_message(data, size, wire, arrays[8], arrays[0])) {
        return STEP_STATUS_LAYOUT;
    }
    const int status = step_inputs(arrays, answer);
    if (status == STEP_STATUS_ANSWERED) {
        const double *out = arrays[6];
        memcpy((unsigned char *)arrays[10] + wire[WIRE_COMMAND], out + OUTPUT_FORCES, 6 * sizeof(double));
    }
    return status;
}
"""


def step_source() -> str:
    """The whole step's part of control_cycle.c (after the delay compensation's)."""
    layouts = [
        "",
        "/* Layouts of the whole step's arrays (read by compiled_step.py), and their offsets. */",
        f'const char hexapod_step_settings[] = "{_layout(STEP_SETTINGS)}";',
        f'const char hexapod_step_memory[] = "{_layout(STEP_MEMORY)}";',
        f'const char hexapod_step_inputs[] = "{_layout(STEP_INPUTS)}";',
        f'const char hexapod_step_outputs[] = "{_layout(STEP_OUTPUTS)}";',
        f'const char hexapod_step_statuses[] = "{" ".join(STEP_STATUSES)}";',
        f"#define WINDOW_HEADER {WINDOW_HEADER}",
        f"#define SENT_ENTRY {SENT_ENTRY}",
        f"#define FLIGHT_CAPACITY {FLIGHT_CAPACITY}",
        f"#define WIRE_HEADER {len(WIRE_FIELDS)}",
        f"#define WIRE_RUNS_CAPACITY {WIRE_RUNS}",
        *(f"#define WIRE_{name.upper()} {index}" for index, name in enumerate(WIRE_FIELDS)),
        f"#define GRID_HEADER {len(GRID_FIELDS)}",
        f"#define GRID_KNOT {GRID_KNOT}",
        *(f"#define GRID_{name.upper()} {index}" for index, name in enumerate(GRID_FIELDS)),
        *_offsets("STEP", STEP_SETTINGS),
        *_offsets("MEMORY", STEP_MEMORY),
        *_offsets("INPUT", STEP_INPUTS),
        *_offsets("OUTPUT", STEP_OUTPUTS),
        *(f"#define STEP_STATUS_{name.upper()} {code}" for code, name in enumerate(STEP_STATUSES)),
        *(f"#define ACTION_{name.upper()} {code}" for code, name in enumerate(ACTIONS)),
    ]
    return "\n".join(layouts) + "\n" + TEMPLATE

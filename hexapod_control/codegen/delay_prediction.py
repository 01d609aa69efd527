"""The numeric core of the delay compensation in C, appended to the control cycle's C file.

``python -m hexapod_control.codegen`` writes these functions at the end of
``model/generated/control_cycle.c`` (control_cycle.py's template), where they share its static
helpers (the forward kinematics, the LU solve) and the generated dynamics terms. Each is a pure
function of its arguments; control/compiled_prediction.py calls them from
control/delay_compensation.py, whose NumPy code stays the reference and the fallback:

* ``hexapod_measure``: the measured forward kinematics of ``DelayCompensatedController.update``
  (Kinematics.forward_kinematics warm-started from a KinematicState, whose four entries go in and
  come out advanced, as KinematicState.predict_phi and advance do);
* ``hexapod_applied_force``: the force that acted over the last period, of ``_estimate``;
* ``hexapod_predict``: ``_predict``, the d semi-implicit Euler steps under the forces in flight.

They mirror the Python formulas operation for operation (ReducedDynamics, ActuatorModel,
Kinematics.solve_passive), so that both round alike. A path where the Python code raises, or needs
what the C code does not have (the continuation of the forward kinematics), returns a status other
than ok (the control cycle's CYCLE_STATUSES): the caller then runs the NumPy code for that call.
"""

from __future__ import annotations

from hexapod_control.codegen.control_cycle import _layout, _offsets

# (name, size): the drives, packed once per model (model/actuators.py); "rigid" is 1.0 when all vanish.
PREDICTION_DRIVES = (
    ("reflected_inertia", 6),  # J [kg]
    ("viscous_friction", 6),  # b [N s/m]
    ("coulomb_friction", 6),  # F_c [N]
    ("coulomb_smoothing_speed", 6),  # v_s [m/s]
    ("rigid", 1),
)
# hexapod_predict's output: the state `steps` periods later.
PREDICTION_OUTPUTS = (("q", 6), ("qd", 6), ("phi", 3))
# hexapod_measure's output.
MEASUREMENT_OUTPUTS = (("phi", 3), ("pose", 6))

TEMPLATE = r"""
/* ------------------------------------------------------------------------------ delay compensation */
/* The numeric core of control/delay_compensation.py (codegen/delay_prediction.py). Every function
 * returns a status of hexapod_cycle_statuses: ok, or where the Python code raises or continues the
 * forward kinematics, another one (the caller then runs the Python code). `settings` is the control
 * cycle's settings vector (its kinematic entries are read), `state` has its layout (its warm start
 * is read), `drives` the layout hexapod_prediction_drives.
 *
 *   int hexapod_measure(const double q[6], double state[...], const double settings[...], double out[9])
 *   int hexapod_measure_rows(const double q[count * 6], int count, double state[...], const double settings[...],
 *                            double out[count * 9], int *status)
 *   int hexapod_applied_force(const double q0[6], const double qd0[6], const double phi0[3], const double qd[6],
 *                             double dt, const double drives[25], const double settings[...],
 *                             const double parameters[...], double out[6])
 *   int hexapod_predict(const double q[6], const double qd[6], const double phi[3], const double forces[steps * 6],
 *                       int steps, double period, const double drives[25], const double settings[...],
 *                       const double parameters[...], double out[15])
 */
int reduced_forward_dynamics(const double *q, const double *phi, const double *qd, const double *tau,
                             const double *parameters, double *out);
int reduced_mass_matrix(const double *q, const double *phi, const double *parameters, double *out);

/* ActuatorModel.friction, entry k: b q_d + F_c tanh(q_d / v_s). */
static double prediction_friction(const double *drives, int k, double qd)
{
    return drives[DRIVE_VISCOUS_FRICTION + k] * qd +
           drives[DRIVE_COULOMB_FRICTION + k] * tanh(qd / drives[DRIVE_COULOMB_SMOOTHING_SPEED + k]);
}

/* DelayCompensatedController._friction_damping, diagonal entry k: h (w b + F_c / v_s (1 - tanh^2(q_d / v_s))),
 * w = `viscous_weight`: 1 here, 1/2 in the embedded plant's step (the viscous part at the mid-step
 * velocity); 1.0 * b is b, so both round as their Python code. */
static double prediction_damping(const double *drives, int k, double qd, double period, double viscous_weight)
{
    const double speed = drives[DRIVE_COULOMB_SMOOTHING_SPEED + k];
    const double shape = tanh(qd / speed);
    return period * (viscous_weight * drives[DRIVE_VISCOUS_FRICTION + k] +
                     drives[DRIVE_COULOMB_FRICTION + k] / speed * (1.0 - shape * shape));
}

/* ReducedDynamics.inverse_dynamics: the generated rigid-body forces, plus the drives' J q_dd + friction(q_d). */
static int prediction_inverse_dynamics(const double *q, const double *qd, const double *qdd, const double *phi,
                                       const double *drives, const double *parameters, double *tau)
{
    if (reduced_inverse_dynamics(q, phi, qd, qdd, parameters, tau) != 0 || !cycle_all_finite(tau, 6)) {
        return STATUS_SINGULAR_TERMS;
    }
    if (drives[DRIVE_RIGID] == 0.0) {
        for (int k = 0; k < N_ACTUATORS; ++k) {
            tau[k] = tau[k] + (drives[DRIVE_REFLECTED_INERTIA + k] * qdd[k] + prediction_friction(drives, k, qd[k]));
        }
    }
    return STATUS_OK;
}

/* Kinematics.forward_kinematics warm-started from `state` (KinematicState.predict_phi, the fast path of
 * solve_passive), which a finished call advances (KinematicState.advance); out = phi (3), pose (6). */
int hexapod_measure(const double *q, double *state, const double *settings, double *out)
{
    if (!cycle_all_finite(q, 6) || !cycle_all_finite(state, STATE_SIZE)) {
        return STATUS_INVALID_INPUT;
    }
    int iterations = 0;
    double residual = 0.0;
    const int status = cycle_forward_kinematics(q, state, settings, out + MEASURED_PHI, out + MEASURED_POSE,
                                                &iterations, &residual);
    if (status == STATUS_OK) {
        cycle_advance(q, out + MEASURED_PHI, state);
    }
    return status;
}

/* hexapod_measure on `count` rows of q in turn (a recording: evaluation/batch.py), each warm-started
 * from the rows before it; out row k = phi (3), pose (6). Returns the rows it finished: it stops at
 * the first that is not ok and puts that row's status in *status (the caller solves that row its
 * own way, the continuation included, and goes on from the next). */
int hexapod_measure_rows(const double *q, int count, double *state, const double *settings, double *out, int *status)
{
    *status = STATUS_OK;
    for (int k = 0; k < count; ++k) {
        *status = hexapod_measure(q + 6 * k, state, settings, out + MEASURED_SIZE * k);
        if (*status != STATUS_OK) {
            return k;
        }
    }
    return count;
}

/* DelayCompensatedController._estimate's applied force over the period dt from (q0, qd0, phi0) to qd:
 * inverse_dynamics(q0, qd0, a, phi0) + friction_damping(qd0, dt) a, a = (qd - qd0) / dt. */
int hexapod_applied_force(const double *q0, const double *qd0, const double *phi0, const double *qd, double dt,
                          const double *drives, const double *settings, const double *parameters, double *out)
{
    double acceleration[6];
    for (int k = 0; k < N_ACTUATORS; ++k) {
        acceleration[k] = (qd[k] - qd0[k]) / dt;
    }
    if (!cycle_all_finite(q0, 6) || !cycle_all_finite(qd0, 6) || !cycle_all_finite(phi0, 3) ||
        !cycle_all_finite(acceleration, 6)) {
        return STATUS_INVALID_INPUT;
    }
    if (!cycle_assembles(q0, settings)) {
        return STATUS_CANNOT_ASSEMBLE;
    }
    const int status = prediction_inverse_dynamics(q0, qd0, acceleration, phi0, drives, parameters, out);
    if (status != STATUS_OK) {
        return status;
    }
    if (drives[DRIVE_RIGID] == 0.0) {
        for (int k = 0; k < N_ACTUATORS; ++k) {
            out[k] = out[k] + prediction_damping(drives, k, qd0[k], dt, 1.0) * acceleration[k];
        }
    }
    return STATUS_OK;
}

/* One step of DelayCompensatedController._predict: the acceleration under `force` at (q, qd, phi). Rigid:
 * ReducedDynamics.forward_dynamics (generated); with drives: (M_bar + h D) q_dd = tau - bias, the friction
 * taken implicitly (D of prediction_damping with `viscous_weight`), solved by LU. */
static int prediction_acceleration(const double *q, const double *qd, const double *phi, const double *force,
                                   double period, double viscous_weight, const double *drives,
                                   const double *parameters, double *acceleration)
{
    if (drives[DRIVE_RIGID] != 0.0) {
        if (reduced_forward_dynamics(q, phi, qd, force, parameters, acceleration) != 0 ||
            !cycle_all_finite(acceleration, 6)) {
            return STATUS_SINGULAR_TERMS;
        }
        return STATUS_OK;
    }
    const double rest[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    double bias[6], mass[36], matrix[36], rhs[6];
    int status = prediction_inverse_dynamics(q, qd, rest, phi, drives, parameters, bias);
    if (status != STATUS_OK) {
        return status;
    }
    if (reduced_mass_matrix(q, phi, parameters, mass) != 0 || !cycle_all_finite(mass, 36)) {
        return STATUS_SINGULAR_TERMS;
    }
    for (int i = 0; i < N_ACTUATORS; ++i) {
        for (int j = 0; j < N_ACTUATORS; ++j) {
            /* ReducedDynamics.mass_matrix: symmetrised, the reflected inertia on the diagonal. */
            double entry = 0.5 * (mass[6 * i + j] + mass[6 * j + i]);
            if (i == j) {
                entry = entry + drives[DRIVE_REFLECTED_INERTIA + i];
            }
            matrix[6 * i + j] = entry + (i == j ? prediction_damping(drives, i, qd[i], period, viscous_weight) : 0.0);
        }
        rhs[i] = force[i] - bias[i];
    }
    if (!cycle_solve(matrix, rhs, acceleration)) {
        return STATUS_SINGULAR_SOLVE;
    }
    return cycle_all_finite(acceleration, 6) ? STATUS_OK : STATUS_NON_FINITE_OUTPUT;
}

/* One semi-implicit Euler step of h: q_d from the acceleration, then q from the new q_d. */
static void semi_implicit_euler(double *q, double *qd, const double *acceleration, double h)
{
    for (int k = 0; k < N_ACTUATORS; ++k) {
        qd[k] = qd[k] + h * acceleration[k];
    }
    for (int k = 0; k < N_ACTUATORS; ++k) {
        q[k] = q[k] + h * qd[k];
    }
}

/* DelayCompensatedController._predict: `steps` semi-implicit Euler steps of `period` from (q, qd, phi),
 * forces[6 step ..] acting over step `step`, phi of each new q by Kinematics.solve_passive from the
 * last phi (the explicit guess: a branch jump is an error, not a continuation). out = q, qd, phi. */
int hexapod_predict(const double *q, const double *qd, const double *phi, const double *forces, int steps,
                    double period, const double *drives, const double *settings, const double *parameters, double *out)
{
    if (steps < 0 || !isfinite(period) || !cycle_all_finite(q, 6) || !cycle_all_finite(qd, 6) ||
        !cycle_all_finite(phi, 3) || !cycle_all_finite(forces, 6 * steps)) {
        return STATUS_INVALID_INPUT;
    }
    double *q_ahead = out + PREDICTED_Q, *qd_ahead = out + PREDICTED_QD, *phi_ahead = out + PREDICTED_PHI;
    memcpy(q_ahead, q, 6 * sizeof(double));
    memcpy(qd_ahead, qd, 6 * sizeof(double));
    memcpy(phi_ahead, phi, 3 * sizeof(double));
    if (steps > 0 && !cycle_assembles(q, settings)) {
        return STATUS_CANNOT_ASSEMBLE; /* the dynamics' check of q; each later q passes solve_passive's */
    }
    for (int step = 0; step < steps; ++step) {
        double acceleration[6];
        int status = prediction_acceleration(q_ahead, qd_ahead, phi_ahead, forces + 6 * step, period, 1.0, drives,
                                             parameters, acceleration);
        if (status != STATUS_OK) {
            return status;
        }
        semi_implicit_euler(q_ahead, qd_ahead, acceleration, period);
        if (!cycle_all_finite(q_ahead, 6) || !cycle_all_finite(qd_ahead, 6)) {
            return STATUS_NON_FINITE_OUTPUT;
        }
        double guess[3], closure[18];
        int iterations = 0;
        double residual = 0.0;
        memcpy(guess, phi_ahead, sizeof guess);
        status = cycle_solve_passive(q_ahead, guess, settings, phi_ahead, closure, &iterations, &residual);
        if (status != STATUS_OK) {
            return status;
        }
    }
    return STATUS_OK;
}
"""


def prediction_source() -> str:
    """The delay compensation's part of control_cycle.c (after the control cycle's)."""
    layouts = [
        "",
        "/* Layouts of the delay compensation's arrays (read by compiled_prediction.py), and their offsets. */",
        f'const char hexapod_prediction_drives[] = "{_layout(PREDICTION_DRIVES)}";',
        f'const char hexapod_prediction_outputs[] = "{_layout(PREDICTION_OUTPUTS)}";',
        f'const char hexapod_measurement_outputs[] = "{_layout(MEASUREMENT_OUTPUTS)}";',
        *_offsets("DRIVE", PREDICTION_DRIVES),
        *_offsets("PREDICTED", PREDICTION_OUTPUTS),
        *_offsets("MEASURED", MEASUREMENT_OUTPUTS),
    ]
    return "\n".join(layouts) + "\n" + TEMPLATE

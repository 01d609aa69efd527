"""The embedded plant's step in C, appended to the control cycle's C file.

``python -m hexapod_control.codegen`` writes ``hexapod_plant_step`` at the end of
``model/generated/control_cycle.c``, where it shares the forward kinematics, the packed drives, the
implicit acceleration (with a viscous weight of 1/2) and the integrator step of the delay
compensation (delay_prediction.py). simulation/compiled_plant.py calls it from
``EmbeddedSimulator.step`` (simulation/embedded.py), whose Python code stays the reference, runs the
plants the C code does not have (``rk4``, ``stick_slip``, the lead screw's friction terms) and every
step the C code does not finish.

The function mirrors ``EmbeddedSimulator.step`` with ``semi_implicit_euler`` operation for operation:
per substep, phi of q by Kinematics.solve_passive warm-started from the plant's KinematicState
(advanced), the acceleration (rigid: the generated forward dynamics; with drives: the linearised
implicit friction of the module doc of embedded.py), then q_d and q; after the substeps, the
divergence guard. Where the Python code raises or continues (the continuation of the forward
kinematics), it returns another status than ok and leaves its outputs and the state unused.
"""

from __future__ import annotations

from hexapod_control.codegen.control_cycle import CYCLE_STATE, _layout, _offsets

# hexapod_plant_step's output: the state at the end of the step, and phi of the last substep's start,
# the plant's KinematicState advanced (the control cycle's state layout).
PLANT_OUTPUTS = (("q", 6), ("qd", 6), ("phi", 3), ("state", sum(size for _, size in CYCLE_STATE)))
# Its settings: the substep [s], the number of substeps, the divergence guard's speed [m/s].
PLANT_SETTINGS = (("substep", 1), ("substeps", 1), ("max_actuator_speed", 1))

TEMPLATE = r"""
/* ------------------------------------------------------------------------------ the embedded plant */
/* EmbeddedSimulator.step with semi_implicit_euler and the drives' smooth law (codegen/plant_step.py),
 * called by simulation/compiled_plant.py. `forces` act over the whole step (the drives' saturated
 * forces plus the external ones); `state` is the plant's KinematicState in the control cycle's state
 * layout, read only: out holds the state advanced by every substep's forward kinematics. out = q, q_d
 * at the end of the step, phi of the last substep's start (EmbeddedSimulator._phi), the state.
 * Returns ok, or the status where the Python step raises or continues (the caller then runs it).
 *
 *   int hexapod_plant_step(const double q[6], const double qd[6], const double forces[6],
 *                          const double state[...], const double plant_settings[3], const double drives[25],
 *                          const double settings[...], const double parameters[...], double out[...])
 */

int hexapod_plant_step(const double *q, const double *qd, const double *forces, const double *state,
                       const double *plant_settings, const double *drives, const double *settings,
                       const double *parameters, double *out)
{
    const double h = plant_settings[PLANT_SETTING_SUBSTEP];
    const int substeps = (int)plant_settings[PLANT_SETTING_SUBSTEPS];
    if (!cycle_all_finite(q, 6) || !cycle_all_finite(qd, 6) || !cycle_all_finite(forces, 6) ||
        !cycle_all_finite(state, STATE_SIZE)) {
        return STATUS_INVALID_INPUT;
    }
    double *q_now = out + PLANT_Q, *qd_now = out + PLANT_QD, *phi = out + PLANT_PHI, *warm = out + PLANT_STATE;
    memcpy(q_now, q, 6 * sizeof(double));
    memcpy(qd_now, qd, 6 * sizeof(double));
    memcpy(warm, state, STATE_SIZE * sizeof(double));
    for (int substep = 0; substep < substeps; ++substep) {
        double guess[3], closure[18], acceleration[6];
        int iterations = 0;
        double residual = 0.0;
        cycle_predict_phi(q_now, warm, guess);
        int status = cycle_solve_passive(q_now, guess, settings, phi, closure, &iterations, &residual);
        if (status != STATUS_OK) {
            return status;
        }
        cycle_advance(q_now, phi, warm);
        /* The drives' viscous friction at the mid-step velocity (embedded.py's module doc). */
        status = prediction_acceleration(q_now, qd_now, phi, forces, h, 0.5, drives, parameters, acceleration);
        if (status != STATUS_OK) {
            return status;
        }
        semi_implicit_euler(q_now, qd_now, acceleration, h);
    }
    /* The divergence guard: every q finite and every |q_d| within the speed. */
    const double max_speed = plant_settings[PLANT_SETTING_MAX_ACTUATOR_SPEED];
    for (int k = 0; k < N_ACTUATORS; ++k) {
        if (!isfinite(q_now[k]) || !(fabs(qd_now[k]) <= max_speed)) {
            return STATUS_NON_FINITE_OUTPUT;
        }
    }
    return STATUS_OK;
}
"""


def plant_source() -> str:
    """The embedded plant's part of control_cycle.c (after the whole step's)."""
    layouts = [
        "",
        "/* Layouts of the plant step's arrays (read by compiled_plant.py), and their offsets. */",
        f'const char hexapod_plant_settings[] = "{_layout(PLANT_SETTINGS)}";',
        f'const char hexapod_plant_outputs[] = "{_layout(PLANT_OUTPUTS)}";',
        *_offsets("PLANT_SETTING", PLANT_SETTINGS),
        *_offsets("PLANT", PLANT_OUTPUTS),
    ]
    return "\n".join(layouts) + "\n" + TEMPLATE

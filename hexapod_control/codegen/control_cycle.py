"""The C control cycle: one function per controller, around the generated dynamics terms.

``python -m hexapod_control.codegen`` writes ``model/generated/control_cycle.c`` from this
template and its layouts. One call of ``hexapod_cycle_double_loop`` or
``hexapod_cycle_computed_torque`` does what one ``update`` of the Python controller does on its
regular path (hexapod_control/control/controllers.py):

* forward kinematics: the secant prediction of KinematicState.predict_phi, then Kinematics._newton
  (same tolerance, step shrink, iteration cap, singular-slope test), the branch-jump check and the
  physical-mode check of Kinematics.solve_passive, and the pose of platform_frame and
  euler_zyx_from_axes. The closure residual, its slopes and the platform frame are the Python
  formulas of ClosedChainKinematics operation for operation, on its own constants (settings), so
  that C and Python round alike: same Newton iterates, same phi, same pose (the ZYX pitch within
  an ulp: C's hypot is glibc's, Python's its own). A closure generated from the SymPy model
  instead lands a few ulp of phi away, which the position gains (1e5 1/s^2) turn into 4e-11 N;
* J_A, J_A_dot q_dot and the conditioning checks through the SymPy-generated
  analytic_jacobian_and_convective (dynamics_terms.c, linked into the same library); the
  conditioning sigma_min / sigma_max of J_A by a one-sided Jacobi SVD;
* J_A^-1 by LU with partial pivoting, or the damped least squares of
  OperationalSpaceController._jacobian_solver below the damping threshold;
* the control law (double loop with conditional-integration anti-windup, or computed torque
  with the generated reduced_inverse_dynamics), the Euler-angle error wrapping and the clamping.

Every path where the Python controller gives the safe output or needs the continuation of its
forward kinematics returns a *deferred* status instead (see CYCLE_STATUSES): the caller then runs the
Python controller for that cycle, which produces the output and message the reference code gives.
A finished cycle advances ``state`` as KinematicState.advance and the integrator do (the caller's
Python objects stay the state of record; compiled_cycle.py keeps the two in step); a deferred one
leaves it as it was.

The layouts below are printed into the C file as strings, and compiled_cycle.py packs and reads
its buffers by these names, so the two cannot drift apart silently.
"""

from __future__ import annotations

# (name, size): the settings vector, packed once per controller.
CYCLE_SETTINGS = (
    ("fk_tolerance", 1),  # Kinematics: FK_TOLERANCE [m]
    ("max_newton_iterations", 1),
    ("max_newton_step", 1),  # [rad]
    ("max_branch_jump", 1),  # [rad]
    ("cyclic_singularity_ratio", 1),  # solve_cyclic: |det| <= this * scale is singular
    ("two_leg_lengths", 1),  # 2L [m]: |q_bar_i| < 2L for the legs to assemble
    # ClosedChainKinematics' constants, as it computed them:
    ("side_cos", 3),  # cos(beta_i)
    ("side_sin", 3),  # sin(beta_i)
    ("side_offset", 1),  # d [m]
    ("four_leg_length_squared", 1),  # 4 L^2 [m^2]
    ("half_platform_side_squared", 1),  # L_P^2 / 2 [m^2]
    ("platform_side", 1),  # L_P [m]
    ("normal_scale", 1),  # 2 / (sqrt 3 L_P^2) [1/m^2]
    ("platform_offset", 1),  # H_PQ [m]
    ("euler_singularity_cos", 1),  # dynamics.EULER_SINGULARITY_COS
    ("damping_threshold", 1),  # controllers.singularity.*
    ("stop_threshold", 1),
    ("max_damping", 1),
    ("constraint_stop_threshold", 1),
    ("force_limit", 1),  # [N]
    ("conditional_integration", 1),  # 1: anti_windup = conditional_integration, 0: none (double loop)
    ("kinematic_gain", 6),  # double loop: K [1/s]
    ("velocity_proportional_gain", 6),  # K_p [N s/m]
    ("velocity_integral_gain", 6),  # K_i [N/m]
    ("position_gain", 6),  # computed torque: K_P [1/s^2]
    ("velocity_gain", 6),  # K_V [1/s]
)
# The warm start and the integrator before the cycle; a finished cycle advances them.
CYCLE_STATE = (("last_q", 6), ("last_phi", 3), ("previous_q", 6), ("previous_phi", 3), ("integral", 6))
# The reference: xi_d, xi_d_dot, xi_d_ddot.
CYCLE_REFERENCE = (("pose", 6), ("velocity", 6), ("acceleration", 6))
CYCLE_OUTPUTS = (
    ("forces", 6),  # clamped [N]
    ("pose", 6),  # xi from the forward kinematics
    ("pose_error", 6),  # xi_d - xi, angles wrapped to (-pi, pi]
    ("saturated", 6),  # 1.0 where the force was clamped
    ("phi", 3),  # passive angles of the physical mode [rad]
    ("joint_command", 6),  # nu_d (double loop) or q_dd = J_A^-1 (...) (computed torque)
    ("velocity_error", 6),  # nu_d - q_dot (double loop)
    ("integral", 6),  # the integrator after this cycle (double loop)
    ("jacobian_conditioning", 1),  # sigma_min / sigma_max of J_A
    ("constraint_conditioning", 1),  # |det dgamma/dphi| / prod(row norms)
    ("fk_iterations", 1),
    ("fk_residual", 1),  # [m]
    ("position_error_norm", 1),  # [m]
    ("orientation_error_norm", 1),  # [rad]
)
# Return values: the first three are outputs of the cycle, the others defer it to Python.
CYCLE_STATUSES = (
    "ok",
    "saturated",
    "near_singular",
    "invalid_input",  # NaN or inf among the inputs
    "cannot_assemble",  # |q_bar_i| >= 2L
    "fk_needs_continuation",  # the warm-started Newton failed or jumped branch
    "not_physical_mode",
    "singular_terms",  # a generated term divided by zero, took sqrt(< 0) or is not finite
    "euler_singular",  # cos(mu) below euler_singularity_cos
    "constraint_stop",  # constraint conditioning below its stop threshold
    "conditioning_stop",  # J_A conditioning below stop_threshold (or NaN)
    "svd_not_converged",
    "singular_solve",  # an exactly zero LU pivot
    "non_finite_output",  # the control law gave NaN or inf
)
CYCLE_CONTROLLERS = ("double_loop", "computed_torque")

HEADER = """/* GENERATED by `python -m hexapod_control.codegen` - do not edit.
 *
 * The control cycle of each controller as one C function, from hexapod_control/codegen/control_cycle.py,
 * around the generated dynamics terms of dynamics_terms.c. Built with dynamics_terms.c into one shared
 * library, at install by setup.py, else at first use by hexapod_control/model/compiled.py; called by
 * hexapod_control/control/compiled_cycle.py. The Python controllers stay the reference and the fallback.
 * At the end, the delay compensation's numeric core (hexapod_control/codegen/delay_prediction.py),
 * the whole step per joint state around it (hexapod_control/codegen/control_step.py) and the embedded
 * plant's step (hexapod_control/codegen/plant_step.py).
 *
 *   int hexapod_cycle_<controller>(const double q[6], const double qd[6], const double reference[18],
 *                                  double period, double feedback_scale, double state[24],
 *                                  const double settings[...], const double parameters[@N_PARAMETERS@],
 *                                  double out[...])
 *
 * returns a status (hexapod_cycle_statuses, by index): ok, saturated and near_singular fill `out` and
 * advance `state` (warm start, integrator); every other status leaves the cycle to the Python
 * controller and `state` as it was. `period` is the time this cycle integrates over [s] (the double
 * loop's; computed torque has no integrator); `feedback_scale` the factor on the feedback gains
 * (the controller's feedback_scale). Layouts: the strings below.
 */

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef M_PI /* not in strict ISO C */
#define M_PI 3.14159265358979323846 /* rounds to math.pi */
#endif

/* From dynamics_terms.c (the same library). */
int analytic_jacobian_and_convective(const double *q, const double *phi, const double *qd,
                                     const double *parameters, double *out);
int reduced_inverse_dynamics(const double *q, const double *phi, const double *qd, const double *qdd,
                             const double *parameters, double *out);

/* SHA-256 of the library's C sources, given by the build (compiled.py and setup.py alike). */
#ifndef HEXAPOD_SOURCE_SHA256
#define HEXAPOD_SOURCE_SHA256 "unknown"
#endif
const char hexapod_source_sha256[] = HEXAPOD_SOURCE_SHA256;
"""

TEMPLATE = r"""
/* ------------------------------------------------------------------------------ layouts */
#define N_ACTUATORS 6
#define JACOBIAN_SWEEPS_MAX 60 /* one-sided Jacobi converges in well under 10 sweeps for 6x6 */
/* Outputs of analytic_jacobian_and_convective: A_phi (18), J_A (36), J_A_dot q_d (6), checks (2). */
#define TERMS_ANALYTIC 18
#define TERMS_CONVECTIVE 54
#define TERMS_CONDITIONING 60
#define TERMS_COS_MU 61
#define TERMS_SIZE 62

static int cycle_all_finite(const double *values, int n)
{
    for (int k = 0; k < n; ++k) {
        if (!isfinite(values[k])) {
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------------------ forward kinematics */
/* ClosedChainKinematics.closure_residual_and_slopes, operation for operation: gamma (3), the slopes
 * a0 b0 a1 b1 a2 b2 of dgamma/dphi (6) and the apexes P_0, P_1, P_2 (9). */
static void cycle_closure_residual_and_slopes(const double *q, const double *phi, const double *settings, double *out)
{
    const double *side_cos = settings + SETTING_SIDE_COS, *side_sin = settings + SETTING_SIDE_SIN;
    const double c0 = side_cos[0], c1 = side_cos[1], c2 = side_cos[2];
    const double s0 = side_sin[0], s1 = side_sin[1], s2 = side_sin[2];
    const double d = settings[SETTING_SIDE_OFFSET], four_l2 = settings[SETTING_FOUR_LEG_LENGTH_SQUARED];
    const double q0 = q[0], q1 = q[1], q2 = q[2], q3 = q[3], q4 = q[4], q5 = q[5];
    /* Side i in its own frame: (x, y, z) = ((qb - qa)/2, d + r cos phi, r sin phi). */
    const double r0 = 0.5 * sqrt(four_l2 - (q0 + q1) * (q0 + q1));
    const double r1 = 0.5 * sqrt(four_l2 - (q2 + q3) * (q2 + q3));
    const double r2 = 0.5 * sqrt(four_l2 - (q4 + q5) * (q4 + q5));
    const double k0 = cos(phi[0]), n0 = sin(phi[0]), k1 = cos(phi[1]), n1 = sin(phi[1]), k2 = cos(phi[2]),
                 n2 = sin(phi[2]);
    const double x0 = 0.5 * (q1 - q0), y0 = d + r0 * k0, z0 = r0 * n0;
    const double x1 = 0.5 * (q3 - q2), y1 = d + r1 * k1, z1 = r1 * n1;
    const double x2 = 0.5 * (q5 - q4), y2 = d + r2 * k2, z2 = r2 * n2;
    /* Apexes and their slopes dP_i/dphi_i = Rz(beta_i) (0, -r sin, r cos) in the base frame. */
    const double px0 = c0 * x0 - s0 * y0, py0 = s0 * x0 + c0 * y0;
    const double px1 = c1 * x1 - s1 * y1, py1 = s1 * x1 + c1 * y1;
    const double px2 = c2 * x2 - s2 * y2, py2 = s2 * x2 + c2 * y2;
    const double tx0 = s0 * z0, ty0 = -c0 * z0, tz0 = r0 * k0;
    const double tx1 = s1 * z1, ty1 = -c1 * z1, tz1 = r1 * k1;
    const double tx2 = s2 * z2, ty2 = -c2 * z2, tz2 = r2 * k2;
    const double half_lp2 = settings[SETTING_HALF_PLATFORM_SIDE_SQUARED];
    double ex = px1 - px0, ey = py1 - py0, ez = z1 - z0;
    out[0] = 0.5 * (ex * ex + ey * ey + ez * ez) - half_lp2;
    out[3] = -(ex * tx0 + ey * ty0 + ez * tz0);
    out[4] = ex * tx1 + ey * ty1 + ez * tz1;
    ex = px2 - px1;
    ey = py2 - py1;
    ez = z2 - z1;
    out[1] = 0.5 * (ex * ex + ey * ey + ez * ez) - half_lp2;
    out[5] = -(ex * tx1 + ey * ty1 + ez * tz1);
    out[6] = ex * tx2 + ey * ty2 + ez * tz2;
    ex = px0 - px2;
    ey = py0 - py2;
    ez = z0 - z2;
    out[2] = 0.5 * (ex * ex + ey * ey + ez * ez) - half_lp2;
    out[7] = -(ex * tx2 + ey * ty2 + ez * tz2);
    out[8] = ex * tx0 + ey * ty0 + ez * tz0;
    const double apexes[9] = {px0, py0, z0, px1, py1, z1, px2, py2, z2};
    memcpy(out + 9, apexes, sizeof apexes);
}

static void cycle_cross(const double *a, const double *b, double *out)
{
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

/* ClosedChainKinematics.platform_frame and euler_zyx_from_axes, operation for operation: the pose
 * (r_F, lambda, mu, nu) from the apexes P_0, P_1, P_2 (9). */
static void cycle_pose(const double *apexes, const double *settings, double *pose)
{
    const double *p0 = apexes, *p1 = apexes + 3, *p2 = apexes + 6;
    const double e21[3] = {p2[0] - p1[0], p2[1] - p1[1], p2[2] - p1[2]};
    const double e01[3] = {p0[0] - p1[0], p0[1] - p1[1], p0[2] - p1[2]};
    const double inverse_side = 1.0 / settings[SETTING_PLATFORM_SIDE], normal_scale = settings[SETTING_NORMAL_SCALE];
    const double y_axis[3] = {inverse_side * e21[0], inverse_side * e21[1], inverse_side * e21[2]};
    double normal[3], z_axis[3], x_axis[3];
    cycle_cross(e21, e01, normal);
    for (int a = 0; a < 3; ++a) {
        z_axis[a] = normal_scale * normal[a];
    }
    cycle_cross(y_axis, z_axis, x_axis);
    const double third = 1.0 / 3.0, offset = settings[SETTING_PLATFORM_OFFSET];
    for (int a = 0; a < 3; ++a) {
        pose[a] = third * ((p0[a] + p1[a]) + p2[a]) + offset * z_axis[a];
    }
    pose[3] = atan2(x_axis[1], x_axis[0]);
    pose[4] = atan2(-x_axis[2], hypot(x_axis[0], x_axis[1]));
    pose[5] = atan2(y_axis[2], z_axis[2]);
}

/* KinematicState.predict_phi: secant prediction from the last two solutions along the motion. */
static void cycle_predict_phi(const double *q, const double *state, double *guess)
{
    const double *last_q = state + STATE_LAST_Q, *previous_q = state + STATE_PREVIOUS_Q;
    const double *last_phi = state + STATE_LAST_PHI, *previous_phi = state + STATE_PREVIOUS_PHI;
    double norm2 = 0.0, dot = 0.0;
    for (int k = 0; k < N_ACTUATORS; ++k) {
        const double step = last_q[k] - previous_q[k];
        norm2 += step * step;
        dot += (q[k] - last_q[k]) * step;
    }
    if (norm2 == 0.0 || !(0.0 < dot && dot <= 2.0 * norm2)) {
        memcpy(guess, last_phi, 3 * sizeof(double));
        return;
    }
    const double s = dot / norm2;
    for (int i = 0; i < 3; ++i) {
        guess[i] = last_phi[i] + s * (last_phi[i] - previous_phi[i]);
    }
}

/* Kinematics._newton from `guess`: 1 with phi, the closure at phi (gamma, slopes, apexes),
 * iterations and residual; 0 on failure. */
static int cycle_newton(const double *q, const double *guess, const double *settings, double *phi, double *closure,
                        int *iterations, double *residual)
{
    const int max_iterations = (int)settings[SETTING_MAX_NEWTON_ITERATIONS];
    const double max_step = settings[SETTING_MAX_NEWTON_STEP];
    memcpy(phi, guess, 3 * sizeof(double));
    for (int iteration = 0; iteration <= max_iterations; ++iteration) {
        cycle_closure_residual_and_slopes(q, phi, settings, closure);
        if (!cycle_all_finite(closure, 18)) {
            return 0; /* Python would go on with NaN and fail at the iteration cap */
        }
        const double r0 = closure[0], r1 = closure[1], r2 = closure[2];
        const double largest_gamma = fmax(fmax(fabs(r0), fabs(r1)), fabs(r2));
        /* |edge| - L_P = gamma / ((|edge| + L_P) / 2) ~ gamma / L_P near closure. */
        const double edge_error = largest_gamma / settings[SETTING_PLATFORM_SIDE];
        if (edge_error <= settings[SETTING_FK_TOLERANCE]) {
            *iterations = iteration;
            *residual = edge_error;
            return 1;
        }
        if (iteration == max_iterations) {
            return 0;
        }
        /* ClosedChainKinematics.solve_cyclic: G = [[a0, b0, 0], [0, a1, b1], [b2, 0, a2]]. */
        const double a0 = closure[3], b0 = closure[4], a1 = closure[5], b1 = closure[6], a2 = closure[7], b2 = closure[8];
        const double det = a0 * a1 * a2 + b0 * b1 * b2;
        const double scale = (fabs(a0) + fabs(b0)) * (fabs(a1) + fabs(b1)) * (fabs(a2) + fabs(b2));
        if (scale == 0.0 || fabs(det) <= settings[SETTING_CYCLIC_SINGULARITY_RATIO] * scale) {
            return 0;
        }
        double step[3];
        step[0] = (r0 * a1 * a2 - b0 * (r1 * a2 - b1 * r2)) / det;
        step[1] = (a0 * (r1 * a2 - b1 * r2) + r0 * b1 * b2) / det;
        step[2] = (a0 * a1 * r2 + b0 * b2 * r1 - a1 * b2 * r0) / det;
        const double largest = fmax(fmax(fabs(step[0]), fabs(step[1])), fabs(step[2]));
        const double shrink = largest > max_step ? max_step / largest : 1.0;
        for (int i = 0; i < 3; ++i) {
            phi[i] = phi[i] - shrink * step[i];
        }
    }
    return 0;
}

/* check_assembly (Kinematics.joint_vector): |q_bar_i| < 2L on every side. */
static int cycle_assembles(const double *q, const double *settings)
{
    const double two_l = settings[SETTING_TWO_LEG_LENGTHS];
    for (int side = 0; side < 3; ++side) {
        const double qbar = q[2 * side] + q[2 * side + 1];
        if (!(-two_l < qbar && qbar < two_l)) {
            return 0;
        }
    }
    return 1;
}

/* Kinematics.solve_passive from `guess`, without the continuation: the assembly check, Newton, the
 * branch-jump check and the physical-mode check; phi and the closure at phi (as cycle_newton). */
static int cycle_solve_passive(const double *q, const double *guess, const double *settings, double *phi,
                               double *closure, int *iterations, double *residual)
{
    if (!cycle_assembles(q, settings)) {
        return STATUS_CANNOT_ASSEMBLE;
    }
    if (!cycle_newton(q, guess, settings, phi, closure, iterations, residual)) {
        return STATUS_FK_NEEDS_CONTINUATION;
    }
    const double jump = fmax(fmax(fabs(phi[0] - guess[0]), fabs(phi[1] - guess[1])), fabs(phi[2] - guess[2]));
    if (jump > settings[SETTING_MAX_BRANCH_JUMP]) {
        return STATUS_FK_NEEDS_CONTINUATION;
    }
    /* is_physical_mode: every leg pair above the base and det dgamma/dphi > 0. */
    for (int i = 0; i < 3; ++i) {
        if (!(0.0 < phi[i] && phi[i] < M_PI)) {
            return STATUS_NOT_PHYSICAL_MODE;
        }
    }
    const double *rows = closure + 3;
    if (!(rows[0] * rows[2] * rows[4] + rows[1] * rows[3] * rows[5] > 0.0)) {
        return STATUS_NOT_PHYSICAL_MODE;
    }
    return STATUS_OK;
}

/* The fast path of Kinematics.solve_passive (the guess of the warm start) and the pose of forward_kinematics. */
static int cycle_forward_kinematics(const double *q, const double *state, const double *settings, double *phi,
                                    double *pose, int *iterations, double *residual)
{
    double guess[3], closure[18]; /* gamma (3), slopes a0 b0 a1 b1 a2 b2 (6), apexes (9) */
    cycle_predict_phi(q, state, guess);
    const int status = cycle_solve_passive(q, guess, settings, phi, closure, iterations, residual);
    if (status != STATUS_OK) {
        return status;
    }
    cycle_pose(closure + 9, settings, pose);
    return STATUS_OK;
}

/* ------------------------------------------------------------------------------ linear algebra */
/* The 15 column pairs of a Jacobi sweep in round-robin order: 5 rounds of 3 disjoint pairs. Each
 * rotation is a chain of divisions and square roots; with consecutive pairs independent, the CPU
 * overlaps three chains (measured 1.3 us per SVD instead of 2.3 us in the row-cyclic order). */
static const int JACOBI_PAIRS[15][2] = {{0, 5}, {1, 4}, {2, 3}, {0, 4}, {5, 3}, {1, 2}, {0, 3}, {4, 2},
                                        {5, 1}, {0, 2}, {3, 1}, {4, 5}, {0, 1}, {2, 5}, {3, 4}};

/* One-sided Jacobi SVD of the row-major 6x6 `matrix`: matrix V = W with orthogonal columns
 * W_j = sigma_j u_j. Fills W, V (row-major; not accumulated when v is NULL, a third cheaper) and
 * sigma_j^2; 0 when it does not converge. */
static int cycle_svd(const double *matrix, double *w, double *v, double *sigma2)
{
    memcpy(w, matrix, 36 * sizeof(double));
    if (v != NULL) {
        for (int k = 0; k < 36; ++k) {
            v[k] = (k % 7 == 0) ? 1.0 : 0.0;
        }
    }
    for (int sweep = 0; sweep < JACOBIAN_SWEEPS_MAX; ++sweep) {
        int rotated = 0;
        for (int pair = 0; pair < 15; ++pair) {
            const int p = JACOBI_PAIRS[pair][0], r = JACOBI_PAIRS[pair][1];
            double alpha = 0.0, beta = 0.0, gamma = 0.0;
            for (int i = 0; i < N_ACTUATORS; ++i) {
                const double wp = w[6 * i + p], wr = w[6 * i + r];
                alpha += wp * wp;
                beta += wr * wr;
                gamma += wp * wr;
            }
            if (!(fabs(gamma) > DBL_EPSILON * sqrt(alpha * beta))) {
                continue; /* columns p and r already orthogonal to working precision */
            }
            rotated = 1;
            const double zeta = (beta - alpha) / (2.0 * gamma);
            const double t = copysign(1.0, zeta) / (fabs(zeta) + sqrt(1.0 + zeta * zeta));
            const double c = 1.0 / sqrt(1.0 + t * t), s = c * t;
            for (int i = 0; i < N_ACTUATORS; ++i) {
                const double wp = w[6 * i + p], wr = w[6 * i + r];
                w[6 * i + p] = c * wp - s * wr;
                w[6 * i + r] = s * wp + c * wr;
            }
            if (v != NULL) {
                for (int i = 0; i < N_ACTUATORS; ++i) {
                    const double vp = v[6 * i + p], vr = v[6 * i + r];
                    v[6 * i + p] = c * vp - s * vr;
                    v[6 * i + r] = s * vp + c * vr;
                }
            }
        }
        if (!rotated) {
            for (int j = 0; j < N_ACTUATORS; ++j) {
                double sum = 0.0;
                for (int i = 0; i < N_ACTUATORS; ++i) {
                    sum += w[6 * i + j] * w[6 * i + j];
                }
                sigma2[j] = sum;
            }
            return 1;
        }
    }
    return 0;
}

/* x = matrix^-1 rhs by LU with partial pivoting (as LAPACK dgesv); 0 on an exactly zero pivot. */
static int cycle_solve(const double *matrix, const double *rhs, double *x)
{
    double a[36], b[6];
    memcpy(a, matrix, sizeof a);
    memcpy(b, rhs, sizeof b);
    for (int k = 0; k < N_ACTUATORS; ++k) {
        int pivot = k;
        for (int i = k + 1; i < N_ACTUATORS; ++i) {
            if (fabs(a[6 * i + k]) > fabs(a[6 * pivot + k])) {
                pivot = i;
            }
        }
        if (a[6 * pivot + k] == 0.0) {
            return 0;
        }
        if (pivot != k) {
            for (int j = 0; j < N_ACTUATORS; ++j) {
                const double swap = a[6 * k + j];
                a[6 * k + j] = a[6 * pivot + j];
                a[6 * pivot + j] = swap;
            }
            const double swap = b[k];
            b[k] = b[pivot];
            b[pivot] = swap;
        }
        for (int i = k + 1; i < N_ACTUATORS; ++i) {
            const double factor = a[6 * i + k] / a[6 * k + k];
            for (int j = k + 1; j < N_ACTUATORS; ++j) {
                a[6 * i + j] -= factor * a[6 * k + j];
            }
            b[i] -= factor * b[k];
        }
    }
    for (int i = N_ACTUATORS - 1; i >= 0; --i) {
        double sum = b[i];
        for (int j = i + 1; j < N_ACTUATORS; ++j) {
            sum -= a[6 * i + j] * x[j];
        }
        x[i] = sum / a[6 * i + i];
    }
    return 1;
}

/* numpy's float remainder (the sign of the divisor), for wrap_angle. */
static double cycle_remainder(double a, double b)
{
    double mod = fmod(a, b);
    if (mod != 0.0) {
        if ((b < 0.0) != (mod < 0.0)) {
            mod += b;
        }
    } else {
        mod = copysign(0.0, b);
    }
    return mod;
}

/* ------------------------------------------------------------------------------ the shared cycle */
/* What OperationalSpaceController.update does before and after its control law. */
typedef struct {
    double phi[3];
    double analytic[36]; /* J_A, row-major */
    double convective[6]; /* J_A_dot q_d */
    double svd_w[36], svd_v[36], sigma2[6];
    double damping2; /* lambda^2 of the damped least squares; < 0: plain J_A^-1 */
} CycleJacobian;

/* v -> J_A^-1 v, damped near a singularity (OperationalSpaceController._jacobian_solver). */
static int cycle_jacobian_solve(const CycleJacobian *jacobian, const double *rhs, double *x)
{
    if (jacobian->damping2 < 0.0) {
        return cycle_solve(jacobian->analytic, rhs, x) ? STATUS_OK : STATUS_SINGULAR_SOLVE;
    }
    /* V diag(sigma / (sigma^2 + lambda^2)) U^T rhs with U_j = W_j / sigma_j. */
    double projected[6];
    for (int j = 0; j < N_ACTUATORS; ++j) {
        double dot = 0.0;
        for (int i = 0; i < N_ACTUATORS; ++i) {
            dot += jacobian->svd_w[6 * i + j] * rhs[i];
        }
        projected[j] = dot / (jacobian->sigma2[j] + jacobian->damping2);
    }
    for (int k = 0; k < N_ACTUATORS; ++k) {
        double sum = 0.0;
        for (int j = 0; j < N_ACTUATORS; ++j) {
            sum += jacobian->svd_v[6 * k + j] * projected[j];
        }
        x[k] = sum;
    }
    return STATUS_OK;
}

/* Validation, forward kinematics, J_A and its checks, the solver choice and the pose error. */
static int cycle_begin(const double *q, const double *qd, const double *reference, const double *state,
                       const double *settings, const double *parameters, double *out, CycleJacobian *jacobian)
{
    if (!cycle_all_finite(q, 6) || !cycle_all_finite(qd, 6) || !cycle_all_finite(reference, 18) ||
        !cycle_all_finite(state, STATE_SIZE)) {
        return STATUS_INVALID_INPUT;
    }
    int iterations = 0;
    double residual = 0.0;
    int status = cycle_forward_kinematics(q, state, settings, jacobian->phi, out + OUT_POSE, &iterations, &residual);
    if (status != STATUS_OK) {
        return status;
    }
    double terms[TERMS_SIZE];
    if (analytic_jacobian_and_convective(q, jacobian->phi, qd, parameters, terms) != 0 ||
        !cycle_all_finite(terms, TERMS_SIZE)) {
        return STATUS_SINGULAR_TERMS;
    }
    if (!(terms[TERMS_COS_MU] >= settings[SETTING_EULER_SINGULARITY_COS])) {
        return STATUS_EULER_SINGULAR;
    }
    memcpy(jacobian->analytic, terms + TERMS_ANALYTIC, sizeof jacobian->analytic);
    memcpy(jacobian->convective, terms + TERMS_CONVECTIVE, sizeof jacobian->convective);
    if (!cycle_svd(jacobian->analytic, jacobian->svd_w, NULL, jacobian->sigma2)) {
        return STATUS_SVD_NOT_CONVERGED;
    }
    double smallest2 = jacobian->sigma2[0], largest2 = jacobian->sigma2[0];
    for (int j = 1; j < N_ACTUATORS; ++j) {
        smallest2 = fmin(smallest2, jacobian->sigma2[j]);
        largest2 = fmax(largest2, jacobian->sigma2[j]);
    }
    const double sigma_max = sqrt(largest2);
    const double conditioning = sqrt(smallest2) / sigma_max;
    const double constraint_conditioning = fabs(terms[TERMS_CONDITIONING]);
    if (constraint_conditioning < settings[SETTING_CONSTRAINT_STOP_THRESHOLD]) {
        return STATUS_CONSTRAINT_STOP;
    }
    if (!(conditioning >= settings[SETTING_STOP_THRESHOLD])) {
        return STATUS_CONDITIONING_STOP;
    }
    jacobian->damping2 = -1.0;
    if (!(conditioning >= settings[SETTING_DAMPING_THRESHOLD])) {
        /* lambda^2 from 0 at the threshold to (max_damping sigma_max)^2 at conditioning 0. */
        const double damping = settings[SETTING_MAX_DAMPING] * sigma_max;
        const double ratio = conditioning / settings[SETTING_DAMPING_THRESHOLD];
        jacobian->damping2 = damping * damping * (1.0 - ratio * ratio);
        /* The same rotations again, now accumulating V for the damped inverse. */
        cycle_svd(jacobian->analytic, jacobian->svd_w, jacobian->svd_v, jacobian->sigma2);
    }
    /* xi_err = xi_d - xi, the Euler angles wrapped to (-pi, pi] (wrap_angle). */
    double *pose = out + OUT_POSE, *pose_error = out + OUT_POSE_ERROR;
    for (int k = 0; k < 6; ++k) {
        pose_error[k] = reference[REFERENCE_POSE + k] - pose[k];
    }
    for (int k = 3; k < 6; ++k) {
        pose_error[k] = M_PI - cycle_remainder(M_PI - pose_error[k], 2.0 * M_PI);
    }
    memcpy(out + OUT_PHI, jacobian->phi, sizeof jacobian->phi);
    out[OUT_JACOBIAN_CONDITIONING] = conditioning;
    out[OUT_CONSTRAINT_CONDITIONING] = constraint_conditioning;
    out[OUT_FK_ITERATIONS] = iterations;
    out[OUT_FK_RESIDUAL] = residual;
    out[OUT_POSITION_ERROR_NORM] =
        sqrt(pose_error[0] * pose_error[0] + pose_error[1] * pose_error[1] + pose_error[2] * pose_error[2]);
    out[OUT_ORIENTATION_ERROR_NORM] =
        sqrt(pose_error[3] * pose_error[3] + pose_error[4] * pose_error[4] + pose_error[5] * pose_error[5]);
    return STATUS_OK;
}

/* Clamping to +-force_limit and the status of a cycle whose control law gave `unclamped`. */
static int cycle_finish(const double *unclamped, const double *settings, const CycleJacobian *jacobian, double *out)
{
    if (!cycle_all_finite(unclamped, 6)) {
        return STATUS_NON_FINITE_OUTPUT;
    }
    const double limit = settings[SETTING_FORCE_LIMIT];
    int saturated = 0;
    for (int k = 0; k < N_ACTUATORS; ++k) {
        out[OUT_FORCES + k] = fmin(fmax(unclamped[k], -limit), limit);
        out[OUT_SATURATED + k] = fabs(unclamped[k]) > limit ? 1.0 : 0.0;
        saturated |= fabs(unclamped[k]) > limit;
    }
    if (jacobian->damping2 >= 0.0) {
        return STATUS_NEAR_SINGULAR;
    }
    return saturated ? STATUS_SATURATED : STATUS_OK;
}

static double cycle_sign(double x)
{
    return (double)((x > 0.0) - (x < 0.0));
}

/* KinematicState.advance after a finished cycle: the last solution becomes the previous one when q moved. */
static void cycle_advance(const double *q, const double *phi, double *state)
{
    int moved = 0;
    for (int k = 0; k < N_ACTUATORS; ++k) {
        moved |= q[k] != state[STATE_LAST_Q + k];
    }
    if (moved) {
        memcpy(state + STATE_PREVIOUS_Q, state + STATE_LAST_Q, 6 * sizeof(double));
        memcpy(state + STATE_PREVIOUS_PHI, state + STATE_LAST_PHI, 3 * sizeof(double));
    }
    memcpy(state + STATE_LAST_Q, q, 6 * sizeof(double));
    memcpy(state + STATE_LAST_PHI, phi, 3 * sizeof(double));
}

/* ------------------------------------------------------------------------------ the controllers */
/* DoubleLoopController: nu_d = J_A^-1 (xi_d_dot + K xi_err), tau = s K_p (nu_d - q_dot) + K_i integral; the
 * integral advances by `period`, the caller's DoubleLoopController.integration_step; s is its feedback_scale. */
int hexapod_cycle_double_loop(const double *q, const double *qd, const double *reference, double period,
                              double feedback_scale, double *state, const double *settings, const double *parameters,
                              double *out)
{
    CycleJacobian jacobian;
    int status = cycle_begin(q, qd, reference, state, settings, parameters, out, &jacobian);
    if (status != STATUS_OK) {
        return status;
    }
    const double *gain = settings + SETTING_KINEMATIC_GAIN;
    const double *kp = settings + SETTING_VELOCITY_PROPORTIONAL_GAIN, *ki = settings + SETTING_VELOCITY_INTEGRAL_GAIN;
    const double *integral = state + STATE_INTEGRAL;
    double rhs[6], unclamped[6];
    double *desired = out + OUT_JOINT_COMMAND, *error = out + OUT_VELOCITY_ERROR;
    for (int k = 0; k < 6; ++k) {
        rhs[k] = reference[REFERENCE_VELOCITY + k] + gain[k] * out[OUT_POSE_ERROR + k];
    }
    status = cycle_jacobian_solve(&jacobian, rhs, desired);
    if (status != STATUS_OK) {
        return status;
    }
    for (int k = 0; k < N_ACTUATORS; ++k) {
        error[k] = desired[k] - qd[k];
        unclamped[k] = kp[k] * feedback_scale * error[k] + ki[k] * integral[k];
    }
    status = cycle_finish(unclamped, settings, &jacobian, out);
    if (status > STATUS_NEAR_SINGULAR) {
        return status;
    }
    /* Conditional integration: no integration while clamped and pushing further into the limit. */
    const int conditional = settings[SETTING_CONDITIONAL_INTEGRATION] != 0.0;
    for (int k = 0; k < N_ACTUATORS; ++k) {
        const int winding = conditional && out[OUT_SATURATED + k] != 0.0 && cycle_sign(error[k]) == cycle_sign(unclamped[k]);
        const double rate = winding ? 0.0 : error[k];
        out[OUT_INTEGRAL + k] = integral[k] + period * rate;
    }
    cycle_advance(q, jacobian.phi, state);
    memcpy(state + STATE_INTEGRAL, out + OUT_INTEGRAL, 6 * sizeof(double));
    return status;
}

/* ComputedTorqueController: q_dd = J_A^-1 (xi_d_ddot + s K_V (xi_d_dot - J_A q_dot) + s K_P xi_err - J_A_dot q_dot),
 * tau = M_bar q_dd + C_bar q_dot + g_bar; s is its feedback_scale. */
int hexapod_cycle_computed_torque(const double *q, const double *qd, const double *reference, double period,
                                  double feedback_scale, double *state, const double *settings,
                                  const double *parameters, double *out)
{
    (void)period; /* no integrator; the argument keeps one signature for both controllers */
    CycleJacobian jacobian;
    int status = cycle_begin(q, qd, reference, state, settings, parameters, out, &jacobian);
    if (status != STATUS_OK) {
        return status;
    }
    const double *kp = settings + SETTING_POSITION_GAIN, *kv = settings + SETTING_VELOCITY_GAIN;
    double commanded[6], unclamped[6];
    for (int k = 0; k < 6; ++k) {
        double pose_rate = 0.0; /* xi_dot = J_A q_dot */
        for (int j = 0; j < N_ACTUATORS; ++j) {
            pose_rate += jacobian.analytic[6 * k + j] * qd[j];
        }
        commanded[k] = reference[REFERENCE_ACCELERATION + k] +
                       kv[k] * feedback_scale * (reference[REFERENCE_VELOCITY + k] - pose_rate) +
                       kp[k] * feedback_scale * out[OUT_POSE_ERROR + k] - jacobian.convective[k];
    }
    double *acceleration = out + OUT_JOINT_COMMAND;
    status = cycle_jacobian_solve(&jacobian, commanded, acceleration);
    if (status != STATUS_OK) {
        return status;
    }
    if (reduced_inverse_dynamics(q, jacobian.phi, qd, acceleration, parameters, unclamped) != 0) {
        return STATUS_SINGULAR_TERMS;
    }
    if (!cycle_all_finite(unclamped, 6)) {
        return STATUS_SINGULAR_TERMS; /* ReducedDynamics reports a non-finite term as singular */
    }
    status = cycle_finish(unclamped, settings, &jacobian, out);
    if (status <= STATUS_NEAR_SINGULAR) {
        cycle_advance(q, jacobian.phi, state);
    }
    return status;
}
"""


def _layout(names_and_sizes) -> str:
    """'name[size] ...' as stored in the C strings."""
    return " ".join(f"{name}[{size}]" for name, size in names_and_sizes)


def _offsets(prefix: str, names_and_sizes) -> list[str]:
    lines, offset = [], 0
    for name, size in names_and_sizes:
        lines.append(f"#define {prefix}_{name.upper()} {offset}")
        offset += size
    lines.append(f"#define {prefix}_SIZE {offset}")
    return lines


def cycle_source(n_parameters: int) -> str:
    """The text of control_cycle.c."""
    layouts = [
        "",
        "/* Layouts of the arrays, 'name[size]' in order (read by compiled_cycle.py), and their offsets. */",
        f'const char hexapod_cycle_settings[] = "{_layout(CYCLE_SETTINGS)}";',
        f'const char hexapod_cycle_state[] = "{_layout(CYCLE_STATE)}";',
        f'const char hexapod_cycle_reference[] = "{_layout(CYCLE_REFERENCE)}";',
        f'const char hexapod_cycle_outputs[] = "{_layout(CYCLE_OUTPUTS)}";',
        f'const char hexapod_cycle_statuses[] = "{" ".join(CYCLE_STATUSES)}";',
        f'const char hexapod_cycle_controllers[] = "{" ".join(CYCLE_CONTROLLERS)}";',
        *_offsets("SETTING", CYCLE_SETTINGS),
        *_offsets("STATE", CYCLE_STATE),
        *_offsets("REFERENCE", CYCLE_REFERENCE),
        *_offsets("OUT", CYCLE_OUTPUTS),
        *(f"#define STATUS_{name.upper()} {code}" for code, name in enumerate(CYCLE_STATUSES)),
        "",
    ]
    return "".join(
        [
            HEADER.replace("@N_PARAMETERS@", str(n_parameters)),
            "\n".join(layouts),
            TEMPLATE,
        ]
    )

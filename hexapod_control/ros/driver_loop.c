/* The fake driver's ticks at the rcl level: no Python per tick while a controller commands it.
 *
 * ros/native_driver.py builds this file against the environment's rcl headers, as native_loop.py
 * builds rcl_loop.c, and calls hexapod_driver_loop with the rcl handles of the driver's command
 * subscription and joint-state publisher (from rclpy), the embedded plant's C step
 * (hexapod_plant_step of the generated library) and its constants. Each tick does what the Python
 * tick of ros/fake_driver.py does, in the same order: sleep to the tick's absolute deadline, publish
 * the plant's state stamped with that deadline, take the commands waiting, hold the latest one and
 * step the plant under it to the next deadline. Python calls it from a thread of its own and
 * meanwhile serves the executor and the diagnostics in another: hexapod_driver_drain hands it what
 * the loop counted and logged so far, with the plant's state, without stopping the ticks. The loop
 * holds `loop_lock` while it ticks and lets go while it sleeps, so a drain sees whole ticks. It
 * returns when:
 *   - the context is no longer valid (Ctrl-C): DRIVER_SHUTDOWN;
 *   - Python asked it to (hexapod_driver_stop, when the node is destroyed): DRIVER_STOPPED;
 *   - it wakes a whole period or more after a deadline and a step of the ticks it missed is
 *     Python's (below): DRIVER_LATE, and Python runs that tick before anything is published;
 *   - a tick needs Python after its take: a command this file does not read (another layout or
 *     length, a non-finite value: Python judges and counts it), no command held or the one held
 *     timed out (Python's command hold counts the timeout and applies zero), a plant step the C
 *     step does not finish or that ends past an end stop (Python's plant steps again from the same
 *     state). The tick has published and taken; Python finishes it from the forces on,
 *     DRIVER_REST, with the steps it has left (DRIVER_IO_STEPS_LEFT);
 *   - a log is full: DRIVER_LOG_FULL.
 * The io array (DRIVER_IO_* below) carries the schedule, the limits and the held command in, and
 * the counts out, counted from the call on; `plant` holds the plant's state (DRIVER_PLANT_*), in and
 * out. The logs hold the ticks and commands since the last drain. Nothing is allocated per tick
 * once the one message buffer is warm.
 */
#include <rcl/rcl.h>
#include <rcutils/allocator.h>
#include <rmw/serialized_message.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef int (*plant_step_fn)(const double *q, const double *qd, const double *forces, const double *state,
                             const double *plant_settings, const double *drives, const double *settings,
                             const double *parameters, double *out);

#define PLANT_STATUS_OK 0

/* Return values. */
#define DRIVER_SHUTDOWN 0
#define DRIVER_STOPPED 1
#define DRIVER_LATE 2
#define DRIVER_REST 3
#define DRIVER_LOG_FULL 4
#define DRIVER_ERROR (-1)

/* The io array: inputs (set by Python before each call), in-outs, then outputs (reset by Python). */
#define DRIVER_IO_DEADLINE 0          /* in-out, monotonic [s]: the next tick's deadline */
#define DRIVER_IO_PERIOD 1            /* [s] */
#define DRIVER_IO_STOP 2              /* in: 1 asks the loop to return (hexapod_driver_stop) */
#define DRIVER_IO_OFFSET_SECONDS 3    /* ROS time - monotonic time: whole seconds, */
#define DRIVER_IO_OFFSET_NANOSECONDS 4 /* and the nanoseconds beyond them (a drain may update both) */
#define DRIVER_IO_TIMEOUT 5           /* [s] the command timeout */
#define DRIVER_IO_FORCE_MAX 6         /* [N] the drives' saturation */
#define DRIVER_IO_LOWER 7             /* [m] the end stops */
#define DRIVER_IO_UPPER 8
#define DRIVER_IO_STEPS_PER_TICK 9
#define DRIVER_IO_HELD 10             /* in-out: 1 when a valid command is held (DRIVER_PLANT_HELD) */
#define DRIVER_IO_HELD_ARRIVAL 11     /* in-out, monotonic [s]: its arrival */
#define DRIVER_IO_TICKS 12            /* out: ticks begun (this and the counts below: since the call) */
#define DRIVER_IO_RECEIVED 13         /* out: commands read and held here */
#define DRIVER_IO_COMMANDS 14         /* out: commands taken, read here or pending */
#define DRIVER_IO_PLANT_STEPS 15      /* out: plant steps done here */
#define DRIVER_IO_TICK_LOG 16         /* out: entries in the tick log (since the last drain) */
#define DRIVER_IO_COMMAND_LOG 17      /* out: entries in the command log (since the last drain) */
#define DRIVER_IO_PENDING_COUNT 18    /* out: commands copied to pending */
#define DRIVER_IO_TAKEN 19            /* out, monotonic [s]: when the tick Python finishes took */
#define DRIVER_IO_STEPS_LEFT 20       /* out: the plant steps that tick has left */
#define DRIVER_IO_OVERSIZED 21        /* out: commands larger than `pending`: never applied, counted rejected */
#define DRIVER_IO_OVERRUNS 22         /* out: ticks skipped because a tick started a period or more late */
#define DRIVER_IO_HELD_TICKS 23       /* out: ticks that stepped the plant under the held command */
#define DRIVER_IO_SIZE 24

/* The plant's state: q, q_d, phi, the C step's warm start, the forces acting (saturated), the held
 * command (as received), and q at the start of the last step done (the end stops' fallback). */
#define DRIVER_PLANT_Q 0
#define DRIVER_PLANT_QD 6
#define DRIVER_PLANT_PHI 12
#define DRIVER_PLANT_WARM 15
#define DRIVER_PLANT_APPLIED 33
#define DRIVER_PLANT_HELD 39
#define DRIVER_PLANT_LAST_START 45
#define DRIVER_PLANT_SIZE 51
#define DRIVER_WARM_SIZE 18

/* The joint-state template's byte offsets (int64): the stamp, position, velocity, effort, size. */
#define DRIVER_MESSAGE_STAMP 0
#define DRIVER_MESSAGE_POSITION 1
#define DRIVER_MESSAGE_VELOCITY 2
#define DRIVER_MESSAGE_EFFORT 3
#define DRIVER_MESSAGE_SIZE 4

/* Where the plant step's output holds its results (int64, from the generated library's layout). */
#define DRIVER_OUT_Q 0
#define DRIVER_OUT_QD 1
#define DRIVER_OUT_PHI 2
#define DRIVER_OUT_WARM 3

#define DRIVER_TICK_ENTRY 4    /* tick log: start (monotonic), stamp, publication, take (ROS time) [s] */
#define DRIVER_COMMAND_ENTRY 2 /* command log: DDS reception and source timestamps [s] (NaN: none) */
#define DRIVER_TAKES 16        /* commands taken at one tick at most; the rest wait for the next */
#define DRIVER_STEP_OUT_SIZE 64 /* doubles the plant step writes, at most (checked by native_driver.py) */
#define NANOSECONDS 1000000000LL

/* Held by the loop while it ticks, by a drain or a stop while they read or write io, plant and logs. */
static pthread_mutex_t loop_lock = PTHREAD_MUTEX_INITIALIZER;

/* Float64MultiArray in little-endian CDR: encapsulation, the layout's dim count and data_offset,
 * the data's count, then the values aligned to 8 bytes from the end of the encapsulation. */
#define COMMAND_DIMS 4
#define COMMAND_COUNT 12
#define COMMAND_VALUES 20
#define CDR_LITTLE_ENDIAN 1

static int64_t clock_nanoseconds(clockid_t clock)
{
    struct timespec now;
    clock_gettime(clock, &now);
    return (int64_t)now.tv_sec * NANOSECONDS + now.tv_nsec;
}

static double seconds(int64_t nanoseconds)
{
    return (double)nanoseconds * 1e-9; /* as rclpy's nanoseconds * 1e-9 */
}

/* The six forces of a command as a ros2_control effort controller reads it: an empty layout, six
 * finite values. 0 for anything else (Python judges it). Exported for the tests. */
int hexapod_driver_command_forces(const unsigned char *data, size_t size, double *forces)
{
    uint32_t dims, count;
    if (size < COMMAND_VALUES + 6 * sizeof(double) || data[1] != CDR_LITTLE_ENDIAN) {
        return 0;
    }
    memcpy(&dims, data + COMMAND_DIMS, sizeof dims);
    memcpy(&count, data + COMMAND_COUNT, sizeof count);
    if (dims != 0 || count != 6) {
        return 0;
    }
    memcpy(forces, data + COMMAND_VALUES, 6 * sizeof(double));
    for (int j = 0; j < 6; ++j) {
        if (!isfinite(forces[j])) {
            return 0;
        }
    }
    return 1;
}

/* Append a command to pending as (int64 size, double monotonic arrival [s], bytes); 0 when full. */
static int keep_pending(const rcl_serialized_message_t *message, double arrived, unsigned char *pending,
                        size_t capacity, size_t *used)
{
    const int64_t size = (int64_t)message->buffer_length;
    if (*used + sizeof size + sizeof arrived + message->buffer_length > capacity) {
        return 0;
    }
    memcpy(pending + *used, &size, sizeof size);
    memcpy(pending + *used + sizeof size, &arrived, sizeof arrived);
    memcpy(pending + *used + sizeof size + sizeof arrived, message->buffer, message->buffer_length);
    *used += sizeof size + sizeof arrived + message->buffer_length;
    return 1;
}

/* a // b of Python's floats (a >= 0, b > 0): TickSchedule.begin's count of missed ticks. */
static double floor_divide(double a, double b)
{
    const double quotient = (a - fmod(a, b)) / b;
    const double whole = floor(quotient);
    return quotient - whole > 0.5 ? whole + 1.0 : whole;
}

/* Write the state into the template and publish it; its stamp is `stamp` [ns, ROS time]. */
static int publish_state(rcl_publisher_t *publisher, rcl_serialized_message_t *state, const int64_t *layout,
                         const double *plant, int64_t stamp)
{
    const int32_t sec = (int32_t)(stamp / NANOSECONDS);
    const uint32_t nanosec = (uint32_t)(stamp % NANOSECONDS);
    memcpy(state->buffer + layout[DRIVER_MESSAGE_STAMP], &sec, sizeof sec);
    memcpy(state->buffer + layout[DRIVER_MESSAGE_STAMP] + sizeof sec, &nanosec, sizeof nanosec);
    memcpy(state->buffer + layout[DRIVER_MESSAGE_POSITION], plant + DRIVER_PLANT_Q, 6 * sizeof(double));
    memcpy(state->buffer + layout[DRIVER_MESSAGE_VELOCITY], plant + DRIVER_PLANT_QD, 6 * sizeof(double));
    memcpy(state->buffer + layout[DRIVER_MESSAGE_EFFORT], plant + DRIVER_PLANT_APPLIED, 6 * sizeof(double));
    return rcl_publish_serialized_message(publisher, state, NULL) == RCL_RET_OK;
}

/* Step the plant `steps` times under `command` [N], saturated; the steps done (fewer when one is
 * Python's: the C step did not finish it, or it ended past an end stop). `out_layout`: where the
 * step's output holds q, q_d, phi and the warm start (DRIVER_OUT_*). */
static int step_plant(plant_step_fn plant_step, void *const *constants, const int64_t *out_layout, double *plant,
                      const double *io, const double *command, int steps)
{
    double forces[6], out[DRIVER_STEP_OUT_SIZE];
    const double limit = io[DRIVER_IO_FORCE_MAX];
    for (int j = 0; j < 6; ++j) {
        forces[j] = fmin(fmax(command[j], -limit), limit);
    }
    for (int done = 0; done < steps; ++done) {
        if (plant_step(plant + DRIVER_PLANT_Q, plant + DRIVER_PLANT_QD, forces, plant + DRIVER_PLANT_WARM,
                       constants[0], constants[1], constants[2], constants[3], out) != PLANT_STATUS_OK) {
            return done;
        }
        const double *q = out + out_layout[DRIVER_OUT_Q];
        for (int j = 0; j < 6; ++j) {
            if (q[j] < io[DRIVER_IO_LOWER] || q[j] > io[DRIVER_IO_UPPER]) {
                return done; /* an end stop: Python's plant re-seats it */
            }
        }
        memcpy(plant + DRIVER_PLANT_LAST_START, plant + DRIVER_PLANT_Q, 6 * sizeof(double));
        memcpy(plant + DRIVER_PLANT_Q, q, 6 * sizeof(double));
        memcpy(plant + DRIVER_PLANT_QD, out + out_layout[DRIVER_OUT_QD], 6 * sizeof(double));
        memcpy(plant + DRIVER_PLANT_PHI, out + out_layout[DRIVER_OUT_PHI], 3 * sizeof(double));
        memcpy(plant + DRIVER_PLANT_WARM, out + out_layout[DRIVER_OUT_WARM], DRIVER_WARM_SIZE * sizeof(double));
        memcpy(plant + DRIVER_PLANT_APPLIED, forces, 6 * sizeof(double));
    }
    return steps;
}

int hexapod_driver_loop(rcl_context_t *context, rcl_subscription_t *subscription, rcl_publisher_t *publisher,
                        unsigned char *state_message, const int64_t *message_layout, plant_step_fn plant_step,
                        void *const *constants, const int64_t *out_layout, double *plant, double *io,
                        double *tick_log, long tick_capacity, double *command_log, long command_capacity,
                        unsigned char *pending, size_t pending_capacity)
{
    rcutils_allocator_t allocator = rcutils_get_default_allocator();
    rcl_serialized_message_t command = rmw_get_zero_initialized_serialized_message();
    if (rmw_serialized_message_init(&command, 1024, &allocator) != RMW_RET_OK) {
        return DRIVER_ERROR;
    }
    /* Borrowed: Python's template; never resized or freed here. */
    rcl_serialized_message_t state = rmw_get_zero_initialized_serialized_message();
    state.buffer = state_message;
    state.buffer_length = state.buffer_capacity = (size_t)message_layout[DRIVER_MESSAGE_SIZE];
    state.allocator = allocator;
    const double period = io[DRIVER_IO_PERIOD];
    const int steps_per_tick = (int)io[DRIVER_IO_STEPS_PER_TICK];
    size_t pending_used = 0;
    int result = DRIVER_ERROR;
    pthread_mutex_lock(&loop_lock);
    for (;;) {
        if (!rcl_context_is_valid(context)) {
            result = DRIVER_SHUTDOWN;
            break;
        }
        if (io[DRIVER_IO_STOP] != 0.0) {
            result = DRIVER_STOPPED;
            break;
        }
        const double deadline = io[DRIVER_IO_DEADLINE];
        const double now = seconds(clock_nanoseconds(CLOCK_MONOTONIC));
        if (now < deadline) {
            pthread_mutex_unlock(&loop_lock);
            const struct timespec until = {(time_t)floor(deadline), (long)((deadline - floor(deadline)) * 1e9)};
            const int slept = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL);
            pthread_mutex_lock(&loop_lock);
            if (slept != 0 && slept != EINTR) {
                break;
            }
            continue; /* a signal (Ctrl-C) wakes it early: the context is checked again */
        }
        const int64_t offset = (int64_t)io[DRIVER_IO_OFFSET_SECONDS] * NANOSECONDS + (int64_t)io[DRIVER_IO_OFFSET_NANOSECONDS];
        /* The tick: as fake_driver.py's _plant_tick. One that starts a whole period or more late
         * skips the ticks it missed (TickSchedule.begin), and the plant goes on through their steps
         * under the forces it had; when one of those steps is Python's, Python runs the tick. */
        const double missed = floor_divide(now - deadline, period);
        if (missed > 0.0) {
            double before[DRIVER_PLANT_SIZE];
            memcpy(before, plant, sizeof before);
            const int steps = (int)missed * steps_per_tick;
            if (step_plant(plant_step, constants, out_layout, plant, io, before + DRIVER_PLANT_APPLIED, steps) < steps) {
                memcpy(plant, before, sizeof before);
                result = DRIVER_LATE;
                break;
            }
            io[DRIVER_IO_PLANT_STEPS] += steps;
            io[DRIVER_IO_OVERRUNS] += missed;
        }
        const double next = deadline + (missed + 1.0) * period;
        io[DRIVER_IO_DEADLINE] = next;
        io[DRIVER_IO_TICKS] += 1.0;
        /* The scheduled time as TickSchedule.scheduled computes it, rounded as Python's round(). */
        const int64_t stamp = (int64_t)nearbyint((next - period) * 1e9) + offset;
        if (!publish_state(publisher, &state, message_layout, plant, stamp)) {
            break;
        }
        double *entry = tick_log + DRIVER_TICK_ENTRY * (long)io[DRIVER_IO_TICK_LOG];
        entry[0] = now;
        entry[1] = seconds(stamp);
        entry[2] = seconds(clock_nanoseconds(CLOCK_REALTIME));
        io[DRIVER_IO_TICK_LOG] += 1.0;
        const int64_t taken_real = clock_nanoseconds(CLOCK_REALTIME);
        const double taken = seconds(clock_nanoseconds(CLOCK_MONOTONIC));
        entry[3] = seconds((int64_t)nearbyint(taken * 1e9) + offset);
        io[DRIVER_IO_TAKEN] = taken;
        for (int k = 0; k < DRIVER_TAKES; ++k) {
            rmw_message_info_t info = rmw_get_zero_initialized_message_info();
            const rcl_ret_t took = rcl_take_serialized_message(subscription, &command, &info, NULL);
            if (took == RCL_RET_SUBSCRIPTION_TAKE_FAILED) {
                break;
            }
            if (took != RCL_RET_OK) {
                goto done;
            }
            /* Its age counts from its DDS reception, not from this take (a middleware that tells
             * none: from the take). */
            const int64_t received = info.received_timestamp ? info.received_timestamp : taken_real;
            const double arrived = taken - seconds(taken_real > received ? taken_real - received : 0);
            double *logged = command_log + DRIVER_COMMAND_ENTRY * (long)io[DRIVER_IO_COMMAND_LOG];
            logged[0] = seconds(received);
            logged[1] = info.source_timestamp ? seconds(info.source_timestamp) : NAN;
            io[DRIVER_IO_COMMAND_LOG] += 1.0;
            io[DRIVER_IO_COMMANDS] += 1.0;
            double forces[6];
            /* Once one is Python's, the later ones are too: the hold sees them in their order. */
            if (io[DRIVER_IO_PENDING_COUNT] == 0.0 &&
                hexapod_driver_command_forces(command.buffer, command.buffer_length, forces)) {
                memcpy(plant + DRIVER_PLANT_HELD, forces, sizeof forces);
                io[DRIVER_IO_HELD] = 1.0;
                io[DRIVER_IO_HELD_ARRIVAL] = arrived;
                io[DRIVER_IO_RECEIVED] += 1.0;
            } else if (keep_pending(&command, arrived, pending, pending_capacity, &pending_used)) {
                io[DRIVER_IO_PENDING_COUNT] += 1.0;
            } else {
                io[DRIVER_IO_OVERSIZED] += 1.0;
            }
        }
        const int held = io[DRIVER_IO_HELD] != 0.0 && taken - io[DRIVER_IO_HELD_ARRIVAL] <= io[DRIVER_IO_TIMEOUT];
        const int stepped = io[DRIVER_IO_PENDING_COUNT] == 0.0 && held
                                ? step_plant(plant_step, constants, out_layout, plant, io,
                                             plant + DRIVER_PLANT_HELD, steps_per_tick)
                                : 0;
        io[DRIVER_IO_PLANT_STEPS] += stepped;
        io[DRIVER_IO_HELD_TICKS] += stepped > 0;
        if (stepped < steps_per_tick) {
            io[DRIVER_IO_STEPS_LEFT] = steps_per_tick - stepped;
            result = DRIVER_REST;
            break;
        }
        /* Room for the next tick's entries, whatever it takes. */
        if (io[DRIVER_IO_TICK_LOG] >= tick_capacity || io[DRIVER_IO_COMMAND_LOG] + DRIVER_TAKES > command_capacity) {
            result = DRIVER_LOG_FULL;
            break;
        }
    }
done:
    pthread_mutex_unlock(&loop_lock);
    (void)rmw_serialized_message_fini(&command);
    return result;
}

/* What the loop running on `io`, `plant` and the logs did so far, without stopping it: io and plant
 * copied whole, the logs' entries moved (the loop's logs start again empty). */
void hexapod_driver_drain(double *io, const double *plant, const double *tick_log, const double *command_log,
                          double *io_copy, double *plant_copy, double *tick_copy, double *command_copy)
{
    pthread_mutex_lock(&loop_lock);
    memcpy(io_copy, io, DRIVER_IO_SIZE * sizeof(double));
    memcpy(plant_copy, plant, DRIVER_PLANT_SIZE * sizeof(double));
    memcpy(tick_copy, tick_log, (size_t)io[DRIVER_IO_TICK_LOG] * DRIVER_TICK_ENTRY * sizeof(double));
    memcpy(command_copy, command_log, (size_t)io[DRIVER_IO_COMMAND_LOG] * DRIVER_COMMAND_ENTRY * sizeof(double));
    io[DRIVER_IO_TICK_LOG] = 0.0;
    io[DRIVER_IO_COMMAND_LOG] = 0.0;
    pthread_mutex_unlock(&loop_lock);
}

/* Set the offset of the ROS time from the monotonic time the loop stamps with. */
void hexapod_driver_set_offset(double *io, double offset_seconds, double offset_nanoseconds)
{
    pthread_mutex_lock(&loop_lock);
    io[DRIVER_IO_OFFSET_SECONDS] = offset_seconds;
    io[DRIVER_IO_OFFSET_NANOSECONDS] = offset_nanoseconds;
    pthread_mutex_unlock(&loop_lock);
}

/* Ask the loop running on `io` to return before its next tick. */
void hexapod_driver_stop(double *io)
{
    pthread_mutex_lock(&loop_lock);
    io[DRIVER_IO_STOP] = 1.0;
    pthread_mutex_unlock(&loop_lock);
}

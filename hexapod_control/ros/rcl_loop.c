/* The robot stack's joint-state loop at the rcl level: no Python per joint state while the compiled
 * step answers (tracking, disarmed or faulted).
 *
 * ros/native_loop.py builds this file against the environment's rcl headers and calls
 * hexapod_rcl_loop with the rcl handles of the stack's joint-state subscription and command
 * publisher (from rclpy). It waits on the subscription alone, takes every waiting message serialized,
 * judges all but the newest and answers the newest through hexapod_step_message (the compiled step,
 * codegen/control_step.py, whose address it is given), publishes the command's bytes and tells the
 * step when (hexapod_step_published). The same wait watches the node's other entities that the
 * executor runs (its subscriptions, timers, clients and services, given as `watched`; not its guard
 * conditions, whose trigger a wait takes, so that the executor would miss it): it takes nothing from
 * them, but one that is ready ends the wait, so that a request is served at once instead of at a
 * blind poll of the executor (Python passes none for a while after each poll: wait_set_loop.py).
 * It returns to Python, which does the rest as the wait-set loop does, when:
 *   - the monotonic deadline passes, or no message came for LOOP_IO_QUIET seconds (the watchdogs'
 *     turn: while states come, the step itself rejects a stale one): LOOP_DEADLINE;
 *   - a message is one the compiled step does not finish (another layout, no reference knot, a
 *     step that latches a fault, a rejected state): it and the messages taken after it are copied to
 *     `pending`, LOOP_PENDING;
 *   - an answer is due to be followed by Python's work (the executor's poll due, a diagnostics
 *     status due, a decimated publication due unless it is recorded for another thread (below), the
 *     law's status not ok): LOOP_ANSWERED. Returning right after an answer puts that work in the gap
 *     before the next state, where it delays none; the deadline is only the fallback when no answer
 *     comes.
 *   - the log of answers is full: LOOP_LOG_FULL;
 *   - a watched entity is ready, after the states taken at that wake are served: LOOP_EXECUTOR
 *     (LOOP_IO_EXECUTOR_READY is set whenever one was, whatever the return).
 * The io array (LOOP_IO_* below, ros/native_loop.py) carries the deadlines in, and the counts, the
 * last state taken and the log of answers out. It never allocates per message once warm.
 */
#include <rcl/rcl.h>
#include <rcl/wait.h>
#include <rcutils/allocator.h>
#include <rmw/serialized_message.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef int (*step_message_fn)(void *const *arrays, const unsigned char *data, long size, int answer);
typedef int (*step_published_fn)(double *memory, const double *settings, double stamp, double when);

/* Step statuses this loop tells apart (codegen/control_step.py STEP_STATUSES, checked by native_loop.py). */
#define STEP_TAKEN 0
#define STEP_REPEATED 1
#define STEP_ANSWERED 2

/* Return values. */
#define LOOP_DEADLINE 0
#define LOOP_PENDING 1
#define LOOP_ANSWERED 2
#define LOOP_LOG_FULL 3
#define LOOP_EXECUTOR 4
#define LOOP_ERROR (-1)

/* The io array: inputs first (set by Python), then outputs (reset by Python before each call). */
#define LOOP_IO_DEADLINE 0           /* monotonic [s]: return at it */
#define LOOP_IO_DIAGNOSTIC_DUE 1     /* ROS time [s]: an answer at or after it returns */
#define LOOP_IO_PUBLICATION_DUE 2    /* stamp [s]: an answer to a state stamped at or after it returns */
#define LOOP_IO_LAW_STATUS_AT 3      /* where the step's output holds the law's status (0: ok) */
#define LOOP_IO_ANSWERS 4            /* answers published */
#define LOOP_IO_TAKEN 5              /* superseded states taken (judged valid) */
#define LOOP_IO_REPEATED 6           /* repeats of a state taken already */
#define LOOP_IO_SUPERSEDED 7         /* states judged because a newer one waited */
#define LOOP_IO_MESSAGE_NOW 8        /* ROS time [s] the last message was taken at */
#define LOOP_IO_TAKEN_NOW 9          /* ROS time [s] of the last state taken */
#define LOOP_IO_TAKEN_STEADY 10      /* monotonic [s] of the last state taken */
#define LOOP_IO_LOG_COUNT 11         /* entries written to the log */
#define LOOP_IO_PENDING_COUNT 12     /* messages copied to pending */
#define LOOP_IO_PENDING_STATUS 13    /* the step's status of the first pending message */
#define LOOP_IO_PENDING_ANSWER 14    /* 1: the first pending message was to be answered */
#define LOOP_IO_PENDING_NOW 15       /* ROS time [s] and monotonic [s] it was taken at */
#define LOOP_IO_PENDING_STEADY 16
#define LOOP_IO_LAST_ANSWERED 17     /* stamp of the last answer [s] */
#define LOOP_IO_QUIET 18             /* [s] without a message after which to return (the watchdog's turn) */
#define LOOP_IO_POLL_DUE 19          /* monotonic [s]: an answer at or after it returns (the executor's poll) */
#define LOOP_IO_EXECUTOR_READY 20    /* 1: a watched entity was ready */
#define LOOP_IO_PUBLICATION_PERIOD 21 /* [s] > 0: a due publication is recorded (below), not returned for */
#define LOOP_IO_INPUTS_SIZE 22       /* the step's inputs and outputs, in doubles (a record holds both) */
#define LOOP_IO_OUT_SIZE 23
#define LOOP_IO_SIZE 24

/* The records of the decimated outputs: at an answer to a state stamped at or after
 * LOOP_IO_PUBLICATION_DUE, with LOOP_IO_PUBLICATION_PERIOD > 0, the step's inputs and outputs are
 * copied into the next slot of a ring, and the due stamp moves a period past the answered one, so
 * that the loop goes on instead of returning. The ring: the number of records written so far, then
 * LOOP_RECORD_SLOTS slots of a sequence number (odd while the slot is written), the inputs and the
 * outputs. Another thread reads them (ros/native_loop.py RecordRing) while the loop runs. */
#define LOOP_RECORD_SLOTS 64

/* The watched entities' kinds, in the order of `watched` and `watched_counts`. */
#define WATCHED_SUBSCRIPTIONS 0
#define WATCHED_TIMERS 1
#define WATCHED_CLIENTS 2
#define WATCHED_SERVICES 3
#define WATCHED_KINDS 4

#define LOOP_LOG_ENTRY 2 /* answered stamp, publication time (ROS time: the wall clock) */
#define LOOP_MESSAGES 16 /* messages taken at one wake at most; the rest wait for the next */

static double clock_seconds(clockid_t clock)
{
    struct timespec now;
    clock_gettime(clock, &now);
    return (double)((int64_t)now.tv_sec * 1000000000 + now.tv_nsec) * 1e-9; /* as rclpy's nanoseconds * 1e-9 */
}

/* Copy messages [first, count) to pending as (int64 size, bytes) records; 0 when they do not fit. */
static int keep_pending(const rcl_serialized_message_t *messages, int first, int count, unsigned char *pending,
                        size_t capacity, double *io)
{
    size_t used = 0;
    for (int k = first; k < count; ++k) {
        const int64_t size = (int64_t)messages[k].buffer_length;
        if (used + sizeof size + (size_t)size > capacity) {
            return 0;
        }
        memcpy(pending + used, &size, sizeof size);
        memcpy(pending + used + sizeof size, messages[k].buffer, (size_t)size);
        used += sizeof size + (size_t)size;
    }
    io[LOOP_IO_PENDING_COUNT] = count - first;
    return 1;
}

/* The step's inputs and outputs of the answer just published, into the ring's next slot. */
static void write_record(double *records, const double *io, const double *inputs, const double *out)
{
    const long inputs_size = (long)io[LOOP_IO_INPUTS_SIZE], out_size = (long)io[LOOP_IO_OUT_SIZE];
    const double written = records[0];
    double *slot = records + 1 + ((long)written % LOOP_RECORD_SLOTS) * (1 + inputs_size + out_size);
    double sequence = slot[0] + 1.0; /* odd: a reader that sees it, or another number after its copy, drops it */
    __atomic_store(&slot[0], &sequence, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(slot + 1, inputs, (size_t)inputs_size * sizeof(double));
    memcpy(slot + 1 + inputs_size, out, (size_t)out_size * sizeof(double));
    sequence += 1.0;
    __atomic_store(&slot[0], &sequence, __ATOMIC_RELEASE);
    const double count = written + 1.0;
    __atomic_store(&records[0], &count, __ATOMIC_RELEASE);
}

/* Add the watched entities (after the loop's own subscription, index 0); 0 when rcl refuses one. */
static int add_watched(rcl_wait_set_t *wait_set, void *const *watched, const long *counts)
{
    long at = 0;
    for (long k = 0; k < counts[WATCHED_SUBSCRIPTIONS]; ++k, ++at) {
        if (rcl_wait_set_add_subscription(wait_set, watched[at], NULL) != RCL_RET_OK) return 0;
    }
    for (long k = 0; k < counts[WATCHED_TIMERS]; ++k, ++at) {
        if (rcl_wait_set_add_timer(wait_set, watched[at], NULL) != RCL_RET_OK) return 0;
    }
    for (long k = 0; k < counts[WATCHED_CLIENTS]; ++k, ++at) {
        if (rcl_wait_set_add_client(wait_set, watched[at], NULL) != RCL_RET_OK) return 0;
    }
    for (long k = 0; k < counts[WATCHED_SERVICES]; ++k, ++at) {
        if (rcl_wait_set_add_service(wait_set, watched[at], NULL) != RCL_RET_OK) return 0;
    }
    return 1;
}

/* Whether rcl_wait found a watched entity ready (it leaves the others NULL). */
static int watched_ready(const rcl_wait_set_t *wait_set)
{
    for (size_t k = 1; k < wait_set->size_of_subscriptions; ++k) {
        if (wait_set->subscriptions[k] != NULL) return 1;
    }
    for (size_t k = 0; k < wait_set->size_of_timers; ++k) {
        if (wait_set->timers[k] != NULL) return 1;
    }
    for (size_t k = 0; k < wait_set->size_of_clients; ++k) {
        if (wait_set->clients[k] != NULL) return 1;
    }
    for (size_t k = 0; k < wait_set->size_of_services; ++k) {
        if (wait_set->services[k] != NULL) return 1;
    }
    return 0;
}

int hexapod_rcl_loop(rcl_context_t *context, rcl_subscription_t *subscription, rcl_publisher_t *publisher,
                     step_message_fn step_message, step_published_fn step_published, void *const *arrays,
                     size_t command_length, double *io, double *log, long log_capacity, unsigned char *pending,
                     size_t pending_capacity, void *const *watched, const long *watched_counts, double *records)
{
    rcutils_allocator_t allocator = rcutils_get_default_allocator();
    rcl_wait_set_t wait_set = rcl_get_zero_initialized_wait_set();
    if (rcl_wait_set_init(&wait_set, 1 + (size_t)watched_counts[WATCHED_SUBSCRIPTIONS], 0,
                          (size_t)watched_counts[WATCHED_TIMERS],
                          (size_t)watched_counts[WATCHED_CLIENTS], (size_t)watched_counts[WATCHED_SERVICES], 0,
                          context, allocator) != RCL_RET_OK) {
        return LOOP_ERROR;
    }
    rcl_serialized_message_t messages[LOOP_MESSAGES];
    int initialized = 0, result = LOOP_DEADLINE;
    for (; initialized < LOOP_MESSAGES; ++initialized) {
        messages[initialized] = rmw_get_zero_initialized_serialized_message();
        if (rmw_serialized_message_init(&messages[initialized], 1024, &allocator) != RMW_RET_OK) {
            result = LOOP_ERROR;
            goto done;
        }
    }
    /* Borrowed: the compiled step writes the forces into this buffer; never resized or freed here. */
    rcl_serialized_message_t command = rmw_get_zero_initialized_serialized_message();
    command.buffer = (uint8_t *)arrays[10];
    command.buffer_length = command_length;
    command.buffer_capacity = command_length;
    command.allocator = allocator;
    double *memory = arrays[1];
    const double *settings = arrays[2];
    const double *inputs = arrays[0];
    double last_message = clock_seconds(CLOCK_MONOTONIC);
    for (;;) {
        const double now_steady = clock_seconds(CLOCK_MONOTONIC);
        const double remaining = fmin(io[LOOP_IO_DEADLINE], last_message + io[LOOP_IO_QUIET]) - now_steady;
        if (remaining <= 0.0) {
            result = LOOP_DEADLINE;
            break;
        }
        if (rcl_wait_set_clear(&wait_set) != RCL_RET_OK ||
            rcl_wait_set_add_subscription(&wait_set, subscription, NULL) != RCL_RET_OK ||
            !add_watched(&wait_set, watched, watched_counts)) {
            result = LOOP_ERROR;
            break;
        }
        const rcl_ret_t waited = rcl_wait(&wait_set, (int64_t)(remaining * 1e9));
        if (waited == RCL_RET_TIMEOUT) {
            continue; /* the deadline check above returns */
        }
        if (waited != RCL_RET_OK) {
            result = LOOP_ERROR;
            break;
        }
        const int executor_ready = watched_ready(&wait_set);
        if (executor_ready) {
            io[LOOP_IO_EXECUTOR_READY] = 1.0;
        }
        int count = 0;
        while (count < LOOP_MESSAGES) {
            rmw_message_info_t info = rmw_get_zero_initialized_message_info();
            const rcl_ret_t taken = rcl_take_serialized_message(subscription, &messages[count], &info, NULL);
            if (taken == RCL_RET_SUBSCRIPTION_TAKE_FAILED) {
                break;
            }
            if (taken != RCL_RET_OK) {
                result = LOOP_ERROR;
                goto done;
            }
            ++count;
        }
        if (count > 0) {
            last_message = clock_seconds(CLOCK_MONOTONIC);
            io[LOOP_IO_SUPERSEDED] += count - 1;
        }
        for (int k = 0; k < count; ++k) {
            const int answer = k == count - 1;
            const double now = clock_seconds(CLOCK_REALTIME), steady = clock_seconds(CLOCK_MONOTONIC);
            ((double *)inputs)[0] = now; /* INPUT_NOW: the step's first input */
            const int status = step_message(arrays, messages[k].buffer, (long)messages[k].buffer_length, answer);
            if (status == STEP_REPEATED) {
                io[LOOP_IO_REPEATED] += 1.0;
                io[LOOP_IO_MESSAGE_NOW] = now;
                continue;
            }
            if (status == STEP_TAKEN && !answer) {
                io[LOOP_IO_TAKEN] += 1.0;
                io[LOOP_IO_MESSAGE_NOW] = io[LOOP_IO_TAKEN_NOW] = now;
                io[LOOP_IO_TAKEN_STEADY] = steady;
                continue;
            }
            if (status != STEP_ANSWERED) {
                /* Python takes it and the ones after it from here, as one wake (the step left its memory
                 * as it was, or its intake took the answered state: LOOP_IO_PENDING_*). */
                io[LOOP_IO_SUPERSEDED] -= count - 1 - k;
                io[LOOP_IO_PENDING_STATUS] = status;
                io[LOOP_IO_PENDING_ANSWER] = answer;
                io[LOOP_IO_PENDING_NOW] = now;
                io[LOOP_IO_PENDING_STEADY] = steady;
                result = keep_pending(messages, k, count, pending, pending_capacity, io) ? LOOP_PENDING : LOOP_ERROR;
                goto done;
            }
            io[LOOP_IO_MESSAGE_NOW] = io[LOOP_IO_TAKEN_NOW] = now;
            io[LOOP_IO_TAKEN_STEADY] = steady;
            if (rcl_publish_serialized_message(publisher, &command, NULL) != RCL_RET_OK) {
                result = LOOP_ERROR;
                goto done;
            }
            const double stamp = inputs[1]; /* INPUT_STAMP */
            const double published = clock_seconds(CLOCK_REALTIME);
            step_published(memory, settings, stamp, published);
            const long entry = (long)io[LOOP_IO_LOG_COUNT];
            log[LOOP_LOG_ENTRY * entry] = stamp;
            log[LOOP_LOG_ENTRY * entry + 1] = published;
            io[LOOP_IO_LOG_COUNT] = entry + 1;
            io[LOOP_IO_ANSWERS] += 1.0;
            io[LOOP_IO_LAST_ANSWERED] = stamp;
            const double *out = arrays[6];
            if (io[LOOP_IO_PUBLICATION_PERIOD] > 0.0 && stamp >= io[LOOP_IO_PUBLICATION_DUE]) {
                write_record(records, io, inputs, out);
                io[LOOP_IO_PUBLICATION_DUE] = stamp + io[LOOP_IO_PUBLICATION_PERIOD];
            }
            if (steady >= io[LOOP_IO_POLL_DUE] || now >= io[LOOP_IO_DIAGNOSTIC_DUE] ||
                stamp >= io[LOOP_IO_PUBLICATION_DUE] || out[(long)io[LOOP_IO_LAW_STATUS_AT]] != 0.0) {
                result = LOOP_ANSWERED;
                goto done;
            }
            if (entry + 1 >= log_capacity) {
                result = LOOP_LOG_FULL;
                goto done;
            }
        }
        if (executor_ready) {
            result = LOOP_EXECUTOR;
            break;
        }
    }
done:
    for (int k = 0; k < initialized; ++k) {
        (void)rmw_serialized_message_fini(&messages[k]);
    }
    (void)rcl_wait_set_fini(&wait_set);
    return result;
}

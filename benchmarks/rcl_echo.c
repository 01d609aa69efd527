/* The floor of a loop with no Python per state: bench_rclpy_floor.py's third pass.
 *
 * Waits on one rcl subscription (created by rclpy, its pointer passed in), takes each message
 * serialized and answers it at once by publishing one fixed serialized command: what an rcl-level
 * C loop pays per state before doing any work. Returns the number of answers, or -1 on an rcl
 * error; stops after `states` answers or when a wait times out. thread_ns[i] is the calling
 * thread's CPU time right after answer i.
 */
#include <rcl/rcl.h>
#include <rcl/wait.h>
#include <rcutils/allocator.h>
#include <rmw/serialized_message.h>
#include <stdint.h>
#include <time.h>

long hexapod_rcl_echo(rcl_context_t *context, rcl_subscription_t *subscription, rcl_publisher_t *publisher,
                      uint8_t *command, size_t command_length, long states, int64_t timeout_ns,
                      int64_t *thread_ns)
{
    rcutils_allocator_t allocator = rcutils_get_default_allocator();
    rcl_wait_set_t wait_set = rcl_get_zero_initialized_wait_set();
    if (rcl_wait_set_init(&wait_set, 1, 0, 0, 0, 0, 0, context, allocator) != RCL_RET_OK) {
        return -1;
    }
    rcl_serialized_message_t taken = rmw_get_zero_initialized_serialized_message();
    if (rmw_serialized_message_init(&taken, 1024, &allocator) != RMW_RET_OK) {
        (void)rcl_wait_set_fini(&wait_set);
        return -1;
    }
    /* Borrowed buffer: never resized or freed through this struct. */
    rcl_serialized_message_t answer = rmw_get_zero_initialized_serialized_message();
    answer.buffer = command;
    answer.buffer_length = command_length;
    answer.buffer_capacity = command_length;
    answer.allocator = allocator;
    long answered = 0;
    while (answered < states) {
        if (rcl_wait_set_clear(&wait_set) != RCL_RET_OK ||
            rcl_wait_set_add_subscription(&wait_set, subscription, NULL) != RCL_RET_OK) {
            answered = -1;
            break;
        }
        rcl_ret_t waited = rcl_wait(&wait_set, timeout_ns);
        if (waited == RCL_RET_TIMEOUT) {
            break;
        }
        if (waited != RCL_RET_OK) {
            answered = -1;
            break;
        }
        rmw_message_info_t info = rmw_get_zero_initialized_message_info();
        while (answered < states && rcl_take_serialized_message(subscription, &taken, &info, NULL) == RCL_RET_OK) {
            if (rcl_publish_serialized_message(publisher, &answer, NULL) != RCL_RET_OK) {
                answered = -1;
                goto done;
            }
            struct timespec now;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
            thread_ns[answered++] = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
        }
    }
done:
    (void)rmw_serialized_message_fini(&taken);
    (void)rcl_wait_set_fini(&wait_set);
    return answered;
}

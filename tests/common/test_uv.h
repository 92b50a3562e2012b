/*
 * test_uv.h - what every libuv test does around the code under test: run
 * a blocking client on its own thread while the loop turns, and close the
 * loop at the end, proving that the module closed all of its handles.
 * Header-only; link libuv and Threads.
 */
#ifndef GN_TEST_UV_H
#define GN_TEST_UV_H

#include <pthread.h>

#include <uv.h>

static inline void gn_test_uv_close_walk(uv_handle_t *h, void *arg)
{
        if (!uv_is_closing(h)) {
                (*(int *)arg)++;
                uv_close(h, NULL);
        }
}

/* Run loop until nothing is active, then close it. 0 when it closed with
 * no handle left: the code under test released everything. Otherwise the
 * handles left open (a leak to report) are closed here so the loop can
 * still be freed, and their number is returned (or uv_loop_close's error
 * if that still fails). Tests assert the result is 0. */
static inline int gn_test_loop_close(uv_loop_t *loop)
{
        int left = 0, rc;

        uv_run(loop, UV_RUN_DEFAULT);
        if (uv_loop_close(loop) == 0)
                return 0;
        uv_walk(loop, gn_test_uv_close_walk, &left);
        uv_run(loop, UV_RUN_DEFAULT);
        rc = uv_loop_close(loop);
        return left > 0 ? left : rc;
}

struct gn_test__uv_job {
        void (*fn)(void *);
        void *arg;
        uv_async_t done;
        int finished;
};

static inline void gn_test_uv_job_closed(uv_handle_t *h)
{
        struct gn_test__uv_job *j = h->data;

        j->finished = 1;
}

/* fn has returned: close the handle; the job is over once it is closed
 * (it lives on gn_test_loop_run_thread's stack). */
static inline void gn_test_uv_job_done(uv_async_t *a)
{
        uv_close((uv_handle_t *)a, gn_test_uv_job_closed);
}

static inline void *gn_test_uv_job_thread(void *p)
{
        struct gn_test__uv_job *j = p;

        j->fn(j->arg);
        uv_async_send(&j->done);
        return NULL;
}

/* Run fn(arg) on a new thread (a blocking client: sockets, HTTP, ...)
 * while this thread turns loop, until fn has returned. 0, or the error of
 * uv_async_init / pthread_create (fn then never runs). */
static inline int gn_test_loop_run_thread(uv_loop_t *loop, void (*fn)(void *),
                                          void *arg)
{
        struct gn_test__uv_job j = {.fn = fn, .arg = arg};
        pthread_t t;
        int rc;

        rc = uv_async_init(loop, &j.done, gn_test_uv_job_done);
        if (rc)
                return rc;
        j.done.data = &j;
        rc = pthread_create(&t, NULL, gn_test_uv_job_thread, &j);
        if (rc) {
                uv_close((uv_handle_t *)&j.done, gn_test_uv_job_closed);
                while (!j.finished)
                        uv_run(loop, UV_RUN_ONCE);
                return -rc;
        }
        while (!j.finished)
                uv_run(loop, UV_RUN_ONCE);
        pthread_join(t, NULL);
        return 0;
}

#endif

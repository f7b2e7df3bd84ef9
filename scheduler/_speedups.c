/* scheduler._speedups: `schedule_task`'s per-task path in C, for the Kafka producer.

Why. Producing a task costs librdkafka about a microsecond; in Python, checking the task and
encoding its record cost as much again (docs/benchmark-history.md, thirty-fifth session).
Issue 3 asks for `schedule_task` at half the rate of raw `produce`, which Python alone did not
reach.

What. Two pieces, each the C twin of Python code that stays the reference:

* `encode_schedule(key, data, max_bytes)`: the record `codec.encode_schedule` writes, for the
  common task (a str key part without quote, backslash or control character, an int time, data
  that orjson encodes without a `null`, a record within `max_bytes`); None for any other, which
  the caller encodes in Python. The bytes are the same as Python's (tests/test_speedups.py checks
  it over generated tasks).
* `RecordSender` (the Kafka producer's `sender`) and `TaskScheduler` (`schedule_task`): the
  send and the whole per-task path. The record's future is an instance of the future class the
  sender was given (`logs/_delivery.py`, which keeps the future cheap), made by the class's own
  constructor with the two fields its `__init__` sets, and it is the record's delivery callback;
  `install_delivery` gives that class its delivery report and `result` in C. Whatever they do not handle themselves (a `validate` hook, a task late
  beyond the grace window, a closed producer, a full queue, any error) goes to the Python
  implementation they were given, which answers exactly as it always did.

Only CPython's public C API, and nothing of `concurrent.futures` but calling the future class.
No step relies on the GIL to be atomic: the settings a `TaskScheduler` reads on every call
(changed by the client's setters from any thread) are read and written under a lock of its own,
and everything else is either immutable after construction or an object whose own methods are
thread-safe. `sends`, the count that paces the senders' polls, may skip or repeat a number under
a free-threaded Python: a poll a little early or late, as in the Python send. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

/* Interned names and shared constants, made once at import. */
static PyObject *s_key, *s_data, *s_ordering_id, *s_scheduled_ms, *s_uniqueness_key;
static PyObject *s_open, *s_option, *s_partition, *s_on_success, *s_fail, *s_made, *s_outcome;
static PyObject *s_already_finished;
static PyObject *minus_one, *zero, *option_kwname, *empty_tuple;

/* ---- the record ------------------------------------------------------------------------- */

/* The JSON string body of a key part, if it needs no escaping: `*out` points at its UTF-8. */
static int
plain_json_string(PyObject *text, const char **out, Py_ssize_t *size)
{
    if (!PyUnicode_CheckExact(text))
        return 0;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, size);
    if (utf8 == NULL) { /* a lone surrogate: Python says what to do with it */
        PyErr_Clear();
        return 0;
    }
    for (Py_ssize_t i = 0; i < *size; i++) {
        unsigned char c = (unsigned char)utf8[i];
        if (c < 0x20 || c == '"' || c == '\\')
            return 0;
    }
    *out = utf8;
    return 1;
}

/* orjson's encoding of `data`, in `*json` (a new reference, or NULL for the empty dict, whose
   encoding is `{}`). 0: done; 1: not for this path (no error set); -1: error. */
typedef struct {
    PyObject *dumps; /* orjson.dumps */
    PyObject *option; /* the option flags codec passes it */
} Dumper;

static int
encode_data(Dumper *dumper, PyObject *data, PyObject **json)
{
    *json = NULL;
    if (PyDict_CheckExact(data) && PyDict_GET_SIZE(data) == 0)
        return 0;
    PyObject *args[2] = {data, dumper->option};
    PyObject *encoded = PyObject_Vectorcall(dumper->dumps, args, 1, option_kwname);
    if (encoded == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return -1;
        PyErr_Clear(); /* orjson refused it: Python's path says why, or encodes it another way */
        return 1;
    }
    if (!PyBytes_CheckExact(encoded)
        || memmem(PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded), "null", 4) != NULL) {
        /* A `null` may be a NaN orjson wrote as null, which the standard library refuses:
           codec checks such data the two-step way. */
        Py_DECREF(encoded);
        return 1;
    }
    *json = encoded;
    return 0;
}

/* The `schedule` record of a task, or NULL: with an error set, an error; without, "encode it
   in Python". The layout is orjson's for codec's dict: same keys, same order, no spaces. */
static PyObject *
encode_record(Dumper *dumper, PyObject *ordering_id, long long scheduled_ms,
              PyObject *uniqueness_key, PyObject *data, Py_ssize_t max_bytes)
{
    static const char head[] = "{\"v\":1,\"op\":\"schedule\",\"oid\":\"";
    static const char at[] = "\",\"at\":";
    static const char uk[] = ",\"uk\":\"";
    static const char data_key[] = "\",\"data\":";
    const char *oid_utf8, *uk_utf8;
    Py_ssize_t oid_size, uk_size;
    if (!plain_json_string(ordering_id, &oid_utf8, &oid_size)
        || !plain_json_string(uniqueness_key, &uk_utf8, &uk_size))
        return NULL;
    PyObject *data_json;
    int encoded = encode_data(dumper, data, &data_json);
    if (encoded != 0)
        return NULL;
    const char *data_bytes = data_json == NULL ? "{}" : PyBytes_AS_STRING(data_json);
    Py_ssize_t data_size = data_json == NULL ? 2 : PyBytes_GET_SIZE(data_json);
    char number[24];
    int number_size = snprintf(number, sizeof number, "%lld", scheduled_ms);
    Py_ssize_t size = (Py_ssize_t)(sizeof head - 1) + oid_size + (Py_ssize_t)(sizeof at - 1)
                      + number_size + (Py_ssize_t)(sizeof uk - 1) + uk_size
                      + (Py_ssize_t)(sizeof data_key - 1) + data_size + 1;
    if (size > max_bytes) { /* codec then checks the data's own size, and may refuse it */
        Py_XDECREF(data_json);
        return NULL;
    }
    PyObject *value = PyBytes_FromStringAndSize(NULL, size);
    if (value != NULL) {
        char *out = PyBytes_AS_STRING(value);
#define PUT(bytes, n) (memcpy(out, (bytes), (size_t)(n)), out += (n))
        PUT(head, sizeof head - 1);
        PUT(oid_utf8, oid_size);
        PUT(at, sizeof at - 1);
        PUT(number, number_size);
        PUT(uk, sizeof uk - 1);
        PUT(uk_utf8, uk_size);
        PUT(data_key, sizeof data_key - 1);
        PUT(data_bytes, data_size);
#undef PUT
        *out = '}';
    }
    Py_XDECREF(data_json);
    return value;
}

/* A key's three parts. 0: read; 1: not for this path (no error set). */
typedef struct {
    PyObject *ordering_id, *uniqueness_key; /* new references */
    long long scheduled_ms;
} KeyParts;

static void
key_parts_clear(KeyParts *parts)
{
    Py_CLEAR(parts->ordering_id);
    Py_CLEAR(parts->uniqueness_key);
}

static int
key_parts_read(PyObject *key, KeyParts *parts)
{
    parts->ordering_id = parts->uniqueness_key = NULL;
    PyObject *scheduled_ms = PyObject_GetAttr(key, s_scheduled_ms);
    if (scheduled_ms == NULL || !PyLong_CheckExact(scheduled_ms)) {
        Py_XDECREF(scheduled_ms);
        PyErr_Clear();
        return 1;
    }
    int overflow;
    parts->scheduled_ms = PyLong_AsLongLongAndOverflow(scheduled_ms, &overflow);
    Py_DECREF(scheduled_ms);
    parts->ordering_id = PyObject_GetAttr(key, s_ordering_id);
    parts->uniqueness_key = PyObject_GetAttr(key, s_uniqueness_key);
    if (overflow || parts->ordering_id == NULL || parts->uniqueness_key == NULL) {
        key_parts_clear(parts);
        PyErr_Clear();
        return 1;
    }
    return 0;
}

/* ---- the record's future ---------------------------------------------------------------- */

/* OUTCOME_LOCK: the lock `logs/_delivery.py` guards every DeliveryFuture's `_made`/`_outcome`
   with (its `_LOCK` where this module is built), so that the delivery report below and the
   Python code take the same one. Python code may hold it across bytecodes, so a C caller that
   finds it taken waits with the GIL released, as `threading.Lock.acquire` does. */

typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
} LockObject;

static LockObject *outcome_lock;

static void
lock_take(PyThread_type_lock lock)
{
    if (PyThread_acquire_lock(lock, NOWAIT_LOCK))
        return;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
}

static PyObject *
lock_enter(LockObject *self, PyObject *unused)
{
    lock_take(self->lock);
    Py_RETURN_TRUE;
}

static PyObject *
lock_exit(LockObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyThread_release_lock(self->lock);
    Py_RETURN_FALSE;
}

static void
lock_dealloc(LockObject *self)
{
    if (self->lock != NULL)
        PyThread_free_lock(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef lock_methods[] = {
    {"__enter__", (PyCFunction)lock_enter, METH_NOARGS, "Take the lock (waits without the GIL)."},
    {"__exit__", (PyCFunction)(void (*)(void))lock_exit, METH_FASTCALL, "Release the lock."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "scheduler._speedups.OutcomeLock",
    .tp_doc = "The lock of every DeliveryFuture's outcome; a context manager.",
    .tp_basicsize = sizeof(LockObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)lock_dealloc,
    .tp_methods = lock_methods,
};

/* What `install_delivery` was given: the class's own `result` (the Python one the C one stands
   in front of) and `concurrent.futures.Future.set_result`. */
static PyObject *python_result, *future_set_result;

/* `__call__(error, message)`: the record's delivery report, `_RecordDelivery.__call__` in C,
   through the future's own fields (`_made`, `_outcome`) and Future's public `set_result`. */
static PyObject *
future_delivered(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "a delivery report takes (error, message)");
        return NULL;
    }
    if (args[0] != Py_None)
        return PyObject_CallMethodObjArgs(self, s_fail, args[0], args[1], NULL);
    PyObject *partition = PyObject_CallMethodNoArgs(args[1], s_partition);
    if (partition == NULL)
        return NULL;
    if (partition == Py_None) {
        Py_DECREF(partition);
        partition = Py_NewRef(zero);
    }
    /* On the class (a sender's subclass): counted before any waiter wakes. */
    PyObject *on_success = PyObject_GetAttr((PyObject *)Py_TYPE(self), s_on_success);
    if (on_success == NULL)
        goto error;
    if (on_success != Py_None) {
        PyObject *counted = PyObject_CallNoArgs(on_success);
        if (counted == NULL) {
            Py_DECREF(on_success);
            goto error;
        }
        Py_DECREF(counted);
    }
    Py_DECREF(on_success);
    /* Both fields are always set (DeliveryFuture.__init__), so reading them runs no Python
       code while the lock is held. */
    int made = -1, twice = 0;
    lock_take(outcome_lock->lock);
    PyObject *made_value = PyObject_GetAttr(self, s_made);
    if (made_value != NULL) {
        made = PyObject_IsTrue(made_value);
        Py_DECREF(made_value);
    }
    if (made == 0) {
        PyObject *outcome = PyObject_GetAttr(self, s_outcome);
        if (outcome == NULL)
            made = -1;
        else {
            twice = outcome != Py_None;
            Py_DECREF(outcome);
            if (!twice && PyObject_SetAttr(self, s_outcome, partition) < 0)
                made = -1;
        }
    }
    PyThread_release_lock(outcome_lock->lock);
    if (made < 0)
        goto error;
    PyObject *done;
    if (made) /* a plain Future by now: Future's own set_result wakes its waiters */
        done = PyObject_CallFunctionObjArgs(future_set_result, self, partition, NULL);
    else if (twice)
        done = PyObject_CallMethodNoArgs(self, s_already_finished);
    else
        done = Py_NewRef(Py_None);
    Py_DECREF(partition);
    return done;
error:
    Py_DECREF(partition);
    return NULL;
}

/* `result(timeout=None)`: a future settled with a partition answers here; anything else in
   Python. `_outcome` is one reference, written once: no lock needed to read it. */
static PyObject *
future_result(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *outcome = PyObject_GetAttr(self, s_outcome);
    if (outcome == NULL)
        return NULL;
    if (PyLong_CheckExact(outcome))
        return outcome;
    Py_DECREF(outcome);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject *stack[8];
    if (nargs + nkw + 1 > 8) {
        PyErr_SetString(PyExc_TypeError, "result() takes at most one argument, timeout");
        return NULL;
    }
    stack[0] = self;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++)
        stack[i + 1] = args[i];
    return PyObject_Vectorcall(python_result, stack, nargs + 1, kwnames);
}

static PyMethodDef future_methods[] = {
    {"__call__", (PyCFunction)(void (*)(void))future_delivered, METH_FASTCALL,
     "The record's delivery report (error, message): resolve or fail the future."},
    {"result", (PyCFunction)(void (*)(void))future_result, METH_FASTCALL | METH_KEYWORDS,
     "Future.result, answered in C once the record is acknowledged."},
    {NULL, NULL, 0, NULL},
};

/* install_delivery(cls, set_result): give `cls` (the producer's record future) the C delivery
   report and `result`; `set_result` is concurrent.futures.Future.set_result. Once. */
static PyObject *
install_delivery(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "install_delivery(cls, Future.set_result)");
        return NULL;
    }
    if (python_result != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "install_delivery is called once");
        return NULL;
    }
    PyObject *cls = args[0];
    PyObject *result = PyObject_GetAttrString(cls, "result");
    if (result == NULL)
        return NULL;
    for (PyMethodDef *method = future_methods; method->ml_name != NULL; method++) {
        PyObject *descriptor = PyDescr_NewMethod((PyTypeObject *)cls, method);
        if (descriptor == NULL || PyObject_SetAttrString(cls, method->ml_name, descriptor) < 0) {
            Py_XDECREF(descriptor);
            Py_DECREF(result);
            return NULL;
        }
        Py_DECREF(descriptor);
    }
    python_result = result;
    future_set_result = Py_NewRef(args[1]);
    Py_RETURN_NONE;
}

/* ---- RecordSender ----------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *producer;     /* the KafkaLogProducer: its `_open` says whether it takes records */
    PyObject *future_type;  /* the sender's `_RecordDelivery` subclass: made for each record */
    PyObject *produce;      /* confluent_kafka.Producer.produce, bound */
    PyObject *topic;
    PyObject *sends;        /* the producer's itertools.count of sends */
    PyObject *poll;         /* the producer's `_poll`, served every `poll_every` sends */
    PyObject *slow_send;    /* the Python send: every case this one does not take */
    long poll_every;
} SenderObject;

/* Send one record: its future, or NULL with an error set. */
static PyObject *
sender_send(SenderObject *self, PyObject *key, PyObject *value)
{
    PyObject *open = PyObject_GetAttr(self->producer, s_open);
    if (open == NULL)
        return NULL;
    int is_open = PyObject_IsTrue(open);
    Py_DECREF(open);
    if (is_open <= 0) { /* closed: the Python send says so */
        if (is_open < 0)
            return NULL;
        PyObject *args[2] = {key, value};
        return PyObject_Vectorcall(self->slow_send, args, 2, NULL);
    }
    /* The future, as `_RecordDelivery()` makes it, without running its `__init__` in Python:
       its class's own constructor (tp_new), then the two fields that `__init__` sets. */
    PyTypeObject *future_type = (PyTypeObject *)self->future_type;
    PyObject *future = future_type->tp_new(future_type, empty_tuple, NULL);
    if (future == NULL)
        return NULL;
    if (PyObject_SetAttr(future, s_made, Py_False) < 0
        || PyObject_SetAttr(future, s_outcome, Py_None) < 0) {
        Py_DECREF(future);
        return NULL;
    }
    /* Positional (topic, value, key, partition, on_delivery), as the Python send calls it;
       partition -1 lets librdkafka's partitioner choose. */
    PyObject *produce_args[5] = {self->topic, value, key, minus_one, future};
    PyObject *produced = PyObject_Vectorcall(self->produce, produce_args, 5, NULL);
    if (produced == NULL) {
        /* Nothing was queued (a full queue, a record librdkafka refuses): the Python send
           waits for room or says what is wrong. */
        Py_DECREF(future);
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return NULL;
        PyErr_Clear();
        PyObject *args[2] = {key, value};
        return PyObject_Vectorcall(self->slow_send, args, 2, NULL);
    }
    Py_DECREF(produced);
    /* Serve ready delivery reports now and then, while this thread holds the GIL anyway. */
    PyObject *count = PyIter_Next(self->sends);
    if (count == NULL) {
        Py_DECREF(future);
        return NULL;
    }
    long sends = PyLong_AsLong(count);
    Py_DECREF(count);
    if (sends % self->poll_every == 0) {
        PyObject *polled = PyObject_CallOneArg(self->poll, zero);
        if (polled == NULL) {
            Py_DECREF(future);
            return NULL;
        }
        Py_DECREF(polled);
    }
    return future;
}

static PyObject *
sender_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "a sender takes (key, value)");
        return NULL;
    }
    return sender_send((SenderObject *)self, args[0], args[1]);
}

static PyObject *
sender_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"producer", "future_type", "produce", "topic", "sends", "poll",
                            "slow_send", "poll_every", NULL};
    PyObject *producer, *future_type, *produce, *topic, *sends, *poll, *slow_send;
    long poll_every;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "$OOOOOOOl", names, &producer, &future_type,
                                     &produce, &topic, &sends, &poll, &slow_send, &poll_every))
        return NULL;
    if (!PyType_Check(future_type) || ((PyTypeObject *)future_type)->tp_new == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "future_type must be a class: the producer's _RecordDelivery subclass");
        return NULL;
    }
    if (poll_every < 1 || !PyIter_Check(sends)) {
        PyErr_SetString(PyExc_ValueError, "poll_every must be >= 1 and sends an iterator");
        return NULL;
    }
    SenderObject *self = (SenderObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = sender_vectorcall;
    self->producer = Py_NewRef(producer);
    self->future_type = Py_NewRef(future_type);
    self->produce = Py_NewRef(produce);
    self->topic = Py_NewRef(topic);
    self->sends = Py_NewRef(sends);
    self->poll = Py_NewRef(poll);
    self->slow_send = Py_NewRef(slow_send);
    self->poll_every = poll_every;
    return (PyObject *)self;
}

static int
sender_traverse(SenderObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->producer);
    Py_VISIT(self->future_type);
    Py_VISIT(self->produce);
    Py_VISIT(self->topic);
    Py_VISIT(self->sends);
    Py_VISIT(self->poll);
    Py_VISIT(self->slow_send);
    return 0;
}

static int
sender_clear(SenderObject *self)
{
    Py_CLEAR(self->producer);
    Py_CLEAR(self->future_type);
    Py_CLEAR(self->produce);
    Py_CLEAR(self->topic);
    Py_CLEAR(self->sends);
    Py_CLEAR(self->poll);
    Py_CLEAR(self->slow_send);
    return 0;
}

static void
sender_dealloc(SenderObject *self)
{
    PyObject_GC_UnTrack(self);
    sender_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject SenderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "scheduler._speedups.RecordSender",
    .tp_doc = "RecordSender(*, producer, future_type, produce, topic, sends, poll, slow_send, "
              "poll_every)\n\nThe Kafka producer's send(key, value) -> future, in C.",
    .tp_basicsize = sizeof(SenderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(SenderObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = sender_new,
    .tp_traverse = (traverseproc)sender_traverse,
    .tp_clear = (inquiry)sender_clear,
    .tp_dealloc = (destructor)sender_dealloc,
};

/* ---- TaskScheduler ---------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Dumper dumper;
    PyObject *send;      /* a RecordSender, or any send(key, value) -> future */
    PyObject *slow;      /* the Python schedule_task: every task this one does not take */
    PyObject *failed;    /* error -> a failed future */
    /* The settings, changed by the client from any thread: read and written under `lock`. */
    PyThread_type_lock lock;
    PyObject *validate;  /* the client's hook: with one, every task goes to `slow` */
    long long grace_ns;
    Py_ssize_t max_data_bytes;
} SchedulerObject;

/* The settings one call reads, copied under the lock (never held while calling Python). */
typedef struct {
    int has_validate;
    long long grace_ns;
    Py_ssize_t max_data_bytes;
} Settings;

static Settings
scheduler_settings(SchedulerObject *self)
{
    Settings settings;
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    settings.has_validate = self->validate != Py_None;
    settings.grace_ns = self->grace_ns;
    settings.max_data_bytes = self->max_data_bytes;
    PyThread_release_lock(self->lock);
    return settings;
}

/* Whether a task at `scheduled_ms` is older than the grace window allows, as
   `scheduled_ms * 1_000_000 < time_ns() - grace_ns` says it in Python, without overflowing. */
static int
older_than_grace(long long scheduled_ms, long long grace_ns)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long oldest_ns = (long long)now.tv_sec * 1000000000LL + now.tv_nsec - grace_ns;
    long long oldest_ms = oldest_ns / 1000000;
    if (scheduled_ms > oldest_ms + 1)
        return 0;
    if (scheduled_ms < oldest_ms - 1)
        return 1;
    return scheduled_ms * 1000000LL < oldest_ns;
}

/* The error being raised, as the failed future the Python schedule_task returns for it. */
static PyObject *
scheduler_failed(SchedulerObject *self)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return NULL;
    PyObject *type, *error, *traceback;
    PyErr_Fetch(&type, &error, &traceback);
    PyErr_NormalizeException(&type, &error, &traceback);
    if (traceback != NULL)
        PyException_SetTraceback(error, traceback);
    PyObject *future = PyObject_CallOneArg(self->failed, error);
    Py_XDECREF(type);
    Py_XDECREF(error);
    Py_XDECREF(traceback);
    return future;
}

static PyObject *
scheduler_schedule(SchedulerObject *self, PyObject *task)
{
    Settings settings = scheduler_settings(self);
    if (settings.has_validate)
        return PyObject_CallOneArg(self->slow, task);
    PyObject *key = PyObject_GetAttr(task, s_key);
    if (key == NULL) {
        PyErr_Clear();
        return PyObject_CallOneArg(self->slow, task);
    }
    KeyParts parts;
    int unread = key_parts_read(key, &parts);
    Py_DECREF(key);
    if (unread)
        return PyObject_CallOneArg(self->slow, task);
    PyObject *data, *value = NULL, *future = NULL;
    if (older_than_grace(parts.scheduled_ms, settings.grace_ns))
        goto slow;
    data = PyObject_GetAttr(task, s_data);
    if (data == NULL) {
        PyErr_Clear();
        goto slow;
    }
    value = encode_record(&self->dumper, parts.ordering_id, parts.scheduled_ms,
                          parts.uniqueness_key, data, settings.max_data_bytes);
    Py_DECREF(data);
    if (value == NULL) {
        if (PyErr_Occurred())
            future = scheduler_failed(self);
        else
            goto slow;
    }
    else {
        /* The ordering id as it is: confluent-kafka writes a str key's UTF-8, in C. */
        if (Py_IS_TYPE(self->send, &SenderType))
            future = sender_send((SenderObject *)self->send, parts.ordering_id, value);
        else {
            PyObject *args[2] = {parts.ordering_id, value};
            future = PyObject_Vectorcall(self->send, args, 2, NULL);
        }
        if (future == NULL)
            future = scheduler_failed(self);
    }
    key_parts_clear(&parts);
    Py_XDECREF(value);
    return future;
slow:
    key_parts_clear(&parts);
    return PyObject_CallOneArg(self->slow, task);
}

static PyObject *
scheduler_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "schedule_task takes one task");
        return NULL;
    }
    return scheduler_schedule((SchedulerObject *)self, args[0]);
}

static PyObject *
scheduler_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"send", "slow", "failed", "dumps", "dumps_option", "validate",
                            "grace_ns", "max_data_bytes", NULL};
    PyObject *send, *slow, *failed, *dumps, *option, *validate;
    long long grace_ns;
    Py_ssize_t max_data_bytes;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "$OOOOOOLn", names, &send, &slow, &failed,
                                     &dumps, &option, &validate, &grace_ns, &max_data_bytes))
        return NULL;
    SchedulerObject *self = (SchedulerObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->vectorcall = scheduler_vectorcall;
    self->dumper.dumps = Py_NewRef(dumps);
    self->dumper.option = Py_NewRef(option);
    self->send = Py_NewRef(send);
    self->slow = Py_NewRef(slow);
    self->failed = Py_NewRef(failed);
    self->validate = Py_NewRef(validate);
    self->grace_ns = grace_ns;
    self->max_data_bytes = max_data_bytes;
    return (PyObject *)self;
}

static int
scheduler_traverse(SchedulerObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->dumper.dumps);
    Py_VISIT(self->dumper.option);
    Py_VISIT(self->send);
    Py_VISIT(self->slow);
    Py_VISIT(self->failed);
    Py_VISIT(self->validate);
    return 0;
}

static int
scheduler_clear(SchedulerObject *self)
{
    Py_CLEAR(self->dumper.dumps);
    Py_CLEAR(self->dumper.option);
    Py_CLEAR(self->send);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->failed);
    Py_CLEAR(self->validate);
    return 0;
}

static void
scheduler_dealloc(SchedulerObject *self)
{
    PyObject_GC_UnTrack(self);
    scheduler_clear(self);
    if (self->lock != NULL)
        PyThread_free_lock(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The settings' getters and setters: each takes the lock for the copy, never while calling
   Python (a setter converts its value first, and drops the old one after). */

static PyObject *
scheduler_get_validate(SchedulerObject *self, void *closure)
{
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    PyObject *validate = Py_NewRef(self->validate);
    PyThread_release_lock(self->lock);
    return validate;
}

static int
scheduler_set_validate(SchedulerObject *self, PyObject *value, void *closure)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "validate cannot be deleted: set it to None");
        return -1;
    }
    Py_INCREF(value);
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    PyObject *old = self->validate;
    self->validate = value;
    PyThread_release_lock(self->lock);
    Py_XDECREF(old);
    return 0;
}

static PyObject *
scheduler_get_grace_ns(SchedulerObject *self, void *closure)
{
    return PyLong_FromLongLong(scheduler_settings(self).grace_ns);
}

static int
scheduler_set_grace_ns(SchedulerObject *self, PyObject *value, void *closure)
{
    long long grace_ns = value == NULL ? -1 : PyLong_AsLongLong(value);
    if (value == NULL || (grace_ns == -1 && PyErr_Occurred())) {
        if (value == NULL)
            PyErr_SetString(PyExc_AttributeError, "grace_ns cannot be deleted");
        return -1;
    }
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    self->grace_ns = grace_ns;
    PyThread_release_lock(self->lock);
    return 0;
}

static PyObject *
scheduler_get_max_data_bytes(SchedulerObject *self, void *closure)
{
    return PyLong_FromSsize_t(scheduler_settings(self).max_data_bytes);
}

static int
scheduler_set_max_data_bytes(SchedulerObject *self, PyObject *value, void *closure)
{
    Py_ssize_t max_data_bytes = value == NULL ? -1 : PyLong_AsSsize_t(value);
    if (value == NULL || (max_data_bytes == -1 && PyErr_Occurred())) {
        if (value == NULL)
            PyErr_SetString(PyExc_AttributeError, "max_data_bytes cannot be deleted");
        return -1;
    }
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    self->max_data_bytes = max_data_bytes;
    PyThread_release_lock(self->lock);
    return 0;
}

static PyGetSetDef scheduler_getset[] = {
    {"validate", (getter)scheduler_get_validate, (setter)scheduler_set_validate,
     "The client's validate hook, or None; with one, every task takes the Python path.", NULL},
    {"grace_ns", (getter)scheduler_get_grace_ns, (setter)scheduler_set_grace_ns,
     "How far in the past a task may be scheduled, in nanoseconds.", NULL},
    {"max_data_bytes", (getter)scheduler_get_max_data_bytes,
     (setter)scheduler_set_max_data_bytes,
     "Records longer than this take the Python path, which checks the data's size.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SchedulerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "scheduler._speedups.TaskScheduler",
    .tp_doc = "TaskScheduler(*, send, slow, failed, dumps, dumps_option, validate, grace_ns, "
              "max_data_bytes)\n\nschedule_task(task) -> future, in C.",
    .tp_basicsize = sizeof(SchedulerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(SchedulerObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = scheduler_new,
    .tp_traverse = (traverseproc)scheduler_traverse,
    .tp_clear = (inquiry)scheduler_clear,
    .tp_dealloc = (destructor)scheduler_dealloc,
    .tp_getset = scheduler_getset,
};

/* ---- module ----------------------------------------------------------------------------- */

/* encode_schedule(key, data, max_bytes, dumps, dumps_option) -> bytes | None */
static PyObject *
encode_schedule(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "encode_schedule(key, data, max_bytes, dumps, dumps_option)");
        return NULL;
    }
    Py_ssize_t max_bytes = PyNumber_AsSsize_t(args[2], PyExc_OverflowError);
    if (max_bytes == -1 && PyErr_Occurred())
        return NULL;
    KeyParts parts;
    if (key_parts_read(args[0], &parts))
        Py_RETURN_NONE;
    Dumper dumper = {args[3], args[4]};
    PyObject *value = encode_record(&dumper, parts.ordering_id, parts.scheduled_ms,
                                    parts.uniqueness_key, args[1], max_bytes);
    key_parts_clear(&parts);
    if (value == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return value;
}

static PyMethodDef module_methods[] = {
    {"install_delivery", (PyCFunction)(void (*)(void))install_delivery, METH_FASTCALL,
     "install_delivery(cls, Future.set_result): the record future's C report and result."},
    {"encode_schedule", (PyCFunction)(void (*)(void))encode_schedule, METH_FASTCALL,
     "The schedule record of a common task, as codec.encode_schedule writes it, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "scheduler._speedups",
    "schedule_task's per-task path in C; see the comment at the top of _speedups.c.", -1,
    module_methods,
};

static int
intern_all(void)
{
    struct { PyObject **name; const char *text; } names[] = {
        {&s_key, "key"}, {&s_data, "data"}, {&s_ordering_id, "ordering_id"},
        {&s_scheduled_ms, "scheduled_ms"}, {&s_uniqueness_key, "uniqueness_key"},
        {&s_open, "_open"}, {&s_option, "option"}, {&s_partition, "partition"},
        {&s_on_success, "_on_success"}, {&s_fail, "_fail"}, {&s_made, "_made"},
        {&s_outcome, "_outcome"}, {&s_already_finished, "_already_finished"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].name = PyUnicode_InternFromString(names[i].text)) == NULL)
            return -1;
    minus_one = PyLong_FromLong(-1);
    zero = PyLong_FromLong(0);
    option_kwname = PyTuple_Pack(1, s_option);
    empty_tuple = PyTuple_New(0);
    if (empty_tuple == NULL)
        return -1;
    return minus_one == NULL || zero == NULL || option_kwname == NULL ? -1 : 0;
}

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (intern_all() < 0 || PyType_Ready(&SenderType) < 0 || PyType_Ready(&SchedulerType) < 0
        || PyType_Ready(&LockType) < 0)
        return NULL;
    outcome_lock = PyObject_New(LockObject, &LockType);
    if (outcome_lock == NULL)
        return NULL;
    outcome_lock->lock = PyThread_allocate_lock();
    if (outcome_lock->lock == NULL)
        return PyErr_NoMemory();
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "RecordSender", (PyObject *)&SenderType) < 0
        || PyModule_AddObjectRef(module, "TaskScheduler", (PyObject *)&SchedulerType) < 0
        || PyModule_AddObjectRef(module, "OUTCOME_LOCK", (PyObject *)outcome_lock) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}

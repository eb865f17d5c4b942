#include <postgresql/libpq-fe.h>
#include <dlfcn.h>
#include <pthread.h>

/*
 * libpq is loaded with dlopen on first use instead of being linked, like libcurl
 * (Sources/CCurl/shim.h) and libsqlite3 (Sources/CSQLite/shim.h): only a process whose config has
 * a shared tier (store.shared) maps it. Call tr_pq_load() before any other tr_pq_ function; it
 * returns 0 when libpq.so.5 or one of its symbols is missing (then no other tr_pq_ function may be
 * called). Thread-safe (pthread_once). The header comes from libpq-dev, the library from libpq5.
 *
 * The table and its once-control are one per process (weak definitions), as in
 * Sources/CCurl/shim.h, which says why.
 */
struct tr_pq_api {
    PGconn *(*connectdb_params)(const char *const *, const char *const *, int);
    ConnStatusType (*status)(const PGconn *);
    char *(*error_message)(const PGconn *);
    void (*finish)(PGconn *);
    PGresult *(*exec_params)(PGconn *, const char *, int, const Oid *, const char *const *, const int *,
                             const int *, int);
    ExecStatusType (*result_status)(const PGresult *);
    char *(*result_error_field)(const PGresult *, int);
    int (*ntuples)(const PGresult *);
    int (*nfields)(const PGresult *);
    char *(*getvalue)(const PGresult *, int, int);
    int (*getlength)(const PGresult *, int, int);
    int (*getisnull)(const PGresult *, int, int);
    void (*clear)(PGresult *);
    int (*socket)(const PGconn *);
    int (*consume_input)(PGconn *);
    PGnotify *(*notifies)(PGconn *);
    void (*freemem)(void *);
    PQnoticeProcessor (*set_notice_processor)(PGconn *, PQnoticeProcessor, void *);
    int loaded;
};

__attribute__((weak)) struct tr_pq_api tr_pq_shared_table = {0};
__attribute__((weak)) pthread_once_t tr_pq_shared_once = PTHREAD_ONCE_INIT;

static inline struct tr_pq_api *tr_pq_table(void) { return &tr_pq_shared_table; }

static inline void tr_pq_load_once(void) {
    struct tr_pq_api *api = tr_pq_table();
    void *library = dlopen("libpq.so.5", RTLD_LAZY | RTLD_LOCAL);
    if (!library) return;
#define TR_PQ_SYMBOL(field, name) \
    *(void **)(&api->field) = dlsym(library, name); \
    if (!api->field) return;
    TR_PQ_SYMBOL(connectdb_params, "PQconnectdbParams")
    TR_PQ_SYMBOL(status, "PQstatus")
    TR_PQ_SYMBOL(error_message, "PQerrorMessage")
    TR_PQ_SYMBOL(finish, "PQfinish")
    TR_PQ_SYMBOL(exec_params, "PQexecParams")
    TR_PQ_SYMBOL(result_status, "PQresultStatus")
    TR_PQ_SYMBOL(result_error_field, "PQresultErrorField")
    TR_PQ_SYMBOL(ntuples, "PQntuples")
    TR_PQ_SYMBOL(nfields, "PQnfields")
    TR_PQ_SYMBOL(getvalue, "PQgetvalue")
    TR_PQ_SYMBOL(getlength, "PQgetlength")
    TR_PQ_SYMBOL(getisnull, "PQgetisnull")
    TR_PQ_SYMBOL(clear, "PQclear")
    TR_PQ_SYMBOL(socket, "PQsocket")
    TR_PQ_SYMBOL(consume_input, "PQconsumeInput")
    TR_PQ_SYMBOL(notifies, "PQnotifies")
    TR_PQ_SYMBOL(freemem, "PQfreemem")
    TR_PQ_SYMBOL(set_notice_processor, "PQsetNoticeProcessor")
#undef TR_PQ_SYMBOL
    api->loaded = 1;
}

static inline struct tr_pq_api *tr_pq_api(void) {
    pthread_once(&tr_pq_shared_once, tr_pq_load_once);
    return tr_pq_table();
}

/** Loads libpq (once); 1 when every entry point was found. */
static inline int tr_pq_load(void) { return tr_pq_api()->loaded; }

/* expand_dbname = 1: a `dbname` value that is a URI is expanded (the configured url). */
static inline PGconn *tr_pq_connect(const char *const *keywords, const char *const *values) {
    return tr_pq_api()->connectdb_params(keywords, values, 1);
}
static inline int tr_pq_connection_ok(const PGconn *conn) { return tr_pq_api()->status(conn) == CONNECTION_OK; }
static inline const char *tr_pq_error_message(const PGconn *conn) { return tr_pq_api()->error_message(conn); }
static inline void tr_pq_finish(PGconn *conn) { tr_pq_api()->finish(conn); }
/* Text parameters and text results only (bytea travels as hex text). */
static inline PGresult *tr_pq_exec(PGconn *conn, const char *sql, int count, const char *const *values) {
    return tr_pq_api()->exec_params(conn, sql, count, NULL, values, NULL, NULL, 0);
}
/* 1: the command succeeded (with or without rows). */
static inline int tr_pq_result_ok(const PGresult *result) {
    ExecStatusType status = tr_pq_api()->result_status(result);
    return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}
static inline const char *tr_pq_result_sqlstate(const PGresult *result) {
    return tr_pq_api()->result_error_field(result, PG_DIAG_SQLSTATE);
}
static inline const char *tr_pq_result_message(const PGresult *result) {
    return tr_pq_api()->result_error_field(result, PG_DIAG_MESSAGE_PRIMARY);
}
static inline int tr_pq_ntuples(const PGresult *result) { return tr_pq_api()->ntuples(result); }
static inline int tr_pq_nfields(const PGresult *result) { return tr_pq_api()->nfields(result); }
static inline const char *tr_pq_getvalue(const PGresult *result, int row, int column) {
    return tr_pq_api()->getvalue(result, row, column);
}
static inline int tr_pq_getlength(const PGresult *result, int row, int column) {
    return tr_pq_api()->getlength(result, row, column);
}
static inline int tr_pq_getisnull(const PGresult *result, int row, int column) {
    return tr_pq_api()->getisnull(result, row, column);
}
static inline void tr_pq_clear(PGresult *result) { tr_pq_api()->clear(result); }
static inline int tr_pq_socket(const PGconn *conn) { return tr_pq_api()->socket(conn); }
static inline int tr_pq_consume_input(PGconn *conn) { return tr_pq_api()->consume_input(conn); }
static inline PGnotify *tr_pq_notifies(PGconn *conn) { return tr_pq_api()->notifies(conn); }
static inline void tr_pq_freemem(void *pointer) { tr_pq_api()->freemem(pointer); }

static inline void tr_pq_ignore_notice(void *argument, const char *message) {
    (void)argument;
    (void)message;
}
/* libpq's default prints server notices (and a server's goodbye) on stderr: tokenrelay's stderr is
   its log, so they are dropped (failures reach the caller as errors). */
static inline void tr_pq_silence_notices(PGconn *conn) {
    tr_pq_api()->set_notice_processor(conn, tr_pq_ignore_notice, NULL);
}

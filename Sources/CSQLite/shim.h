#include <sqlite3.h>
#include <dlfcn.h>
#include <pthread.h>

/*
 * libsqlite3 is loaded with dlopen on first use instead of being linked, like libcurl
 * (Sources/CCurl/shim.h): a tokenrelay start that needs no token (initialize, ping,
 * check-config, a memory store) does not map it. Call tr_sqlite_load() before any other
 * tr_sqlite_ function; it returns 0 when libsqlite3.so.0 or one of its symbols is missing (then
 * no other tr_sqlite_ function may be called). Thread-safe (pthread_once).
 * Opened with RTLD_LAZY, like libcurl (Sources/CCurl/shim.h).
 *
 * The functions are copied into every module (and file) that calls them; the table and its
 * once-control are one per process (weak definitions), as in Sources/CCurl/shim.h, which says
 * why. Every wrapper goes through pthread_once (one check).
 */
struct tr_sqlite_api {
    int (*open_v2)(const char *, sqlite3 **, int, const char *);
    int (*close_v2)(sqlite3 *);
    int (*exec)(sqlite3 *, const char *, int (*)(void *, int, char **, char **), void *, char **);
    const char *(*errmsg)(sqlite3 *);
    int (*busy_timeout)(sqlite3 *, int);
    int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
    int (*step)(sqlite3_stmt *);
    int (*reset)(sqlite3_stmt *);
    int (*finalize)(sqlite3_stmt *);
    int (*bind_text)(sqlite3_stmt *, int, const char *, int, void (*)(void *));
    int (*bind_blob)(sqlite3_stmt *, int, const void *, int, void (*)(void *));
    int (*bind_int64)(sqlite3_stmt *, int, sqlite3_int64);
    int (*bind_double)(sqlite3_stmt *, int, double);
    int (*bind_null)(sqlite3_stmt *, int);
    int (*column_count)(sqlite3_stmt *);
    int (*column_type)(sqlite3_stmt *, int);
    const unsigned char *(*column_text)(sqlite3_stmt *, int);
    const void *(*column_blob)(sqlite3_stmt *, int);
    int (*column_bytes)(sqlite3_stmt *, int);
    sqlite3_int64 (*column_int64)(sqlite3_stmt *, int);
    double (*column_double)(sqlite3_stmt *, int);
    int (*changes)(sqlite3 *);
    int loaded;
};

/*
 * The process's one table and once-control. Weak definitions: every object that uses them emits
 * one and the linker keeps a single one, so all copies of the functions below share them.
 */
__attribute__((weak)) struct tr_sqlite_api tr_sqlite_shared_table = {0};
__attribute__((weak)) pthread_once_t tr_sqlite_shared_once = PTHREAD_ONCE_INIT;

static inline struct tr_sqlite_api *tr_sqlite_table(void) { return &tr_sqlite_shared_table; }

static inline void tr_sqlite_load_once(void) {
    struct tr_sqlite_api *api = tr_sqlite_table();
    void *library = dlopen("libsqlite3.so.0", RTLD_LAZY | RTLD_LOCAL);
    if (!library) return;
#define TR_SQLITE_SYMBOL(field, name) \
    *(void **)(&api->field) = dlsym(library, name); \
    if (!api->field) return;
    TR_SQLITE_SYMBOL(open_v2, "sqlite3_open_v2")
    TR_SQLITE_SYMBOL(close_v2, "sqlite3_close_v2")
    TR_SQLITE_SYMBOL(exec, "sqlite3_exec")
    TR_SQLITE_SYMBOL(errmsg, "sqlite3_errmsg")
    TR_SQLITE_SYMBOL(busy_timeout, "sqlite3_busy_timeout")
    TR_SQLITE_SYMBOL(prepare_v2, "sqlite3_prepare_v2")
    TR_SQLITE_SYMBOL(step, "sqlite3_step")
    TR_SQLITE_SYMBOL(reset, "sqlite3_reset")
    TR_SQLITE_SYMBOL(finalize, "sqlite3_finalize")
    TR_SQLITE_SYMBOL(bind_text, "sqlite3_bind_text")
    TR_SQLITE_SYMBOL(bind_blob, "sqlite3_bind_blob")
    TR_SQLITE_SYMBOL(bind_int64, "sqlite3_bind_int64")
    TR_SQLITE_SYMBOL(bind_double, "sqlite3_bind_double")
    TR_SQLITE_SYMBOL(bind_null, "sqlite3_bind_null")
    TR_SQLITE_SYMBOL(column_count, "sqlite3_column_count")
    TR_SQLITE_SYMBOL(column_type, "sqlite3_column_type")
    TR_SQLITE_SYMBOL(column_text, "sqlite3_column_text")
    TR_SQLITE_SYMBOL(column_blob, "sqlite3_column_blob")
    TR_SQLITE_SYMBOL(column_bytes, "sqlite3_column_bytes")
    TR_SQLITE_SYMBOL(column_int64, "sqlite3_column_int64")
    TR_SQLITE_SYMBOL(column_double, "sqlite3_column_double")
    TR_SQLITE_SYMBOL(changes, "sqlite3_changes")
#undef TR_SQLITE_SYMBOL
    api->loaded = 1;
}

/** The table, loaded (once per process) first. */
static inline struct tr_sqlite_api *tr_sqlite_api(void) {
    pthread_once(&tr_sqlite_shared_once, tr_sqlite_load_once);
    return tr_sqlite_table();
}

/** Loads libsqlite3 (once); 1 when every entry point was found. */
static inline int tr_sqlite_load(void) { return tr_sqlite_api()->loaded; }

static inline int tr_sqlite_open(const char *path, sqlite3 **db, int flags) {
    return tr_sqlite_api()->open_v2(path, db, flags, NULL);
}
static inline int tr_sqlite_close(sqlite3 *db) { return tr_sqlite_api()->close_v2(db); }
static inline int tr_sqlite_exec(sqlite3 *db, const char *sql) { return tr_sqlite_api()->exec(db, sql, NULL, NULL, NULL); }
static inline const char *tr_sqlite_errmsg(sqlite3 *db) { return tr_sqlite_api()->errmsg(db); }
static inline int tr_sqlite_busy_timeout(sqlite3 *db, int ms) { return tr_sqlite_api()->busy_timeout(db, ms); }
static inline int tr_sqlite_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **statement) {
    return tr_sqlite_api()->prepare_v2(db, sql, -1, statement, NULL);
}
static inline int tr_sqlite_step(sqlite3_stmt *statement) { return tr_sqlite_api()->step(statement); }
static inline int tr_sqlite_reset(sqlite3_stmt *statement) { return tr_sqlite_api()->reset(statement); }
static inline int tr_sqlite_finalize(sqlite3_stmt *statement) { return tr_sqlite_api()->finalize(statement); }
/* Text and blobs are copied by SQLite (SQLITE_TRANSIENT), so the caller's buffer may go away. */
static inline int tr_sqlite_bind_text(sqlite3_stmt *statement, int index, const char *text, int length) {
    return tr_sqlite_api()->bind_text(statement, index, text, length, SQLITE_TRANSIENT);
}
static inline int tr_sqlite_bind_blob(sqlite3_stmt *statement, int index, const void *bytes, int length) {
    return tr_sqlite_api()->bind_blob(statement, index, bytes, length, SQLITE_TRANSIENT);
}
static inline int tr_sqlite_bind_int64(sqlite3_stmt *statement, int index, sqlite3_int64 value) {
    return tr_sqlite_api()->bind_int64(statement, index, value);
}
static inline int tr_sqlite_bind_double(sqlite3_stmt *statement, int index, double value) {
    return tr_sqlite_api()->bind_double(statement, index, value);
}
static inline int tr_sqlite_bind_null(sqlite3_stmt *statement, int index) { return tr_sqlite_api()->bind_null(statement, index); }
static inline int tr_sqlite_column_count(sqlite3_stmt *statement) { return tr_sqlite_api()->column_count(statement); }
static inline int tr_sqlite_column_type(sqlite3_stmt *statement, int index) { return tr_sqlite_api()->column_type(statement, index); }
static inline const unsigned char *tr_sqlite_column_text(sqlite3_stmt *statement, int index) {
    return tr_sqlite_api()->column_text(statement, index);
}
static inline const void *tr_sqlite_column_blob(sqlite3_stmt *statement, int index) {
    return tr_sqlite_api()->column_blob(statement, index);
}
static inline int tr_sqlite_column_bytes(sqlite3_stmt *statement, int index) { return tr_sqlite_api()->column_bytes(statement, index); }
static inline sqlite3_int64 tr_sqlite_column_int64(sqlite3_stmt *statement, int index) {
    return tr_sqlite_api()->column_int64(statement, index);
}
static inline double tr_sqlite_column_double(sqlite3_stmt *statement, int index) {
    return tr_sqlite_api()->column_double(statement, index);
}
static inline int tr_sqlite_changes(sqlite3 *db) { return tr_sqlite_api()->changes(db); }

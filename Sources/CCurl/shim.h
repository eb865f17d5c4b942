#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>

/*
 * libcurl is loaded with dlopen on first use instead of being linked: its dependency tree
 * (Kerberos, LDAP, SSH, RTMP, nghttp2, brotli...) costs several milliseconds at exec, which
 * every tokenrelay start would pay even when it never sends a request (initialize, ping,
 * check-config). Call tr_curl_load() once before any other tr_ function; it returns 0 when
 * libcurl.so.4 or one of its symbols is missing (then no other tr_ function may be called).
 * Thread-safe (pthread_once). The library is opened with RTLD_LAZY, as the dynamic loader
 * opens a linked curl: binding every symbol of the tree at once (RTLD_NOW) made each
 * `tokenrelay call` ~20 % slower (scripts/bench's call vs curl: 3.1x -> 2.5x, median of 5
 * interleaved). The symbols this table needs are still checked here, with dlsym.
 *
 * Every module that imports this header gets its own copy of these static inline functions (in
 * a release build, whose whole-module compilation is split across threads, every Swift file that
 * calls them does), but the table and its once-control are one per process: weak definitions
 * that the linker merges. So the library is opened once. Copies with tables of their own each
 * called dlopen on their first use, and a dlopen of a library already loaded still waits for the
 * dynamic loader's lock, which another thread's dlopen holds throughout: a stored-token `call`
 * waited for all of libcurl's tree that way before its store could open libsqlite3. Every
 * wrapper goes through pthread_once (one check), so no caller needs to have called
 * tr_curl_load() first; libcurl is still mapped only when a wrapper is first called.
 * Sources/CSQLite/shim.h and Sources/CCrypto/shim.h follow the same rule. SwiftPM does not track
 * this header: after editing it, touch the Swift files that import CCurl (or build clean), or
 * an incremental build keeps the old copies.
 */
struct tr_curl_api {
    CURLcode (*global_init)(long);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURLMcode (*multi_perform)(CURLM *, int *);
    CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned int, int, int *);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    CURLcode (*easy_pause)(CURL *, int);
    const char *(*easy_strerror)(CURLcode);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    CURLU *(*url)(void);
    void (*url_cleanup)(CURLU *);
    CURLUcode (*url_set)(CURLU *, CURLUPart, const char *, unsigned int);
    CURLUcode (*url_get)(const CURLU *, CURLUPart, char **, unsigned int);
    const char *(*url_strerror)(CURLUcode);
    void (*free)(void *);
    int loaded;
};

/*
 * The process's one table and once-control. Weak definitions: every object that uses them emits
 * one and the linker keeps a single one, so all copies of the functions below share them.
 */
__attribute__((weak)) struct tr_curl_api tr_curl_shared_table = {0};
__attribute__((weak)) pthread_once_t tr_curl_shared_once = PTHREAD_ONCE_INIT;

static inline struct tr_curl_api *tr_curl_table(void) { return &tr_curl_shared_table; }

static inline void tr_curl_load_once(void) {
    struct tr_curl_api *api = tr_curl_table();
    void *library = dlopen("libcurl.so.4", RTLD_LAZY | RTLD_LOCAL);
    if (!library) return;
#define TR_CURL_SYMBOL(field, name) \
    *(void **)(&api->field) = dlsym(library, name); \
    if (!api->field) return;
    TR_CURL_SYMBOL(global_init, "curl_global_init")
    TR_CURL_SYMBOL(multi_init, "curl_multi_init")
    TR_CURL_SYMBOL(multi_cleanup, "curl_multi_cleanup")
    TR_CURL_SYMBOL(multi_perform, "curl_multi_perform")
    TR_CURL_SYMBOL(multi_poll, "curl_multi_poll")
    TR_CURL_SYMBOL(multi_add_handle, "curl_multi_add_handle")
    TR_CURL_SYMBOL(multi_remove_handle, "curl_multi_remove_handle")
    TR_CURL_SYMBOL(multi_info_read, "curl_multi_info_read")
    TR_CURL_SYMBOL(multi_setopt, "curl_multi_setopt")
    TR_CURL_SYMBOL(easy_init, "curl_easy_init")
    TR_CURL_SYMBOL(easy_cleanup, "curl_easy_cleanup")
    TR_CURL_SYMBOL(easy_pause, "curl_easy_pause")
    TR_CURL_SYMBOL(easy_strerror, "curl_easy_strerror")
    TR_CURL_SYMBOL(easy_setopt, "curl_easy_setopt")
    TR_CURL_SYMBOL(easy_getinfo, "curl_easy_getinfo")
    TR_CURL_SYMBOL(slist_append, "curl_slist_append")
    TR_CURL_SYMBOL(slist_free_all, "curl_slist_free_all")
    TR_CURL_SYMBOL(url, "curl_url")
    TR_CURL_SYMBOL(url_cleanup, "curl_url_cleanup")
    TR_CURL_SYMBOL(url_set, "curl_url_set")
    TR_CURL_SYMBOL(url_get, "curl_url_get")
    TR_CURL_SYMBOL(url_strerror, "curl_url_strerror")
    TR_CURL_SYMBOL(free, "curl_free")
#undef TR_CURL_SYMBOL
    api->loaded = 1;
}

/** The table, loaded (once per process) first. */
static inline struct tr_curl_api *tr_curl_api(void) {
    pthread_once(&tr_curl_shared_once, tr_curl_load_once);
    return tr_curl_table();
}

/** Loads libcurl (once); 1 when every entry point was found. */
static inline int tr_curl_load(void) { return tr_curl_api()->loaded; }

static inline CURLcode tr_global_init(long flags) { return tr_curl_api()->global_init(flags); }
static inline CURLM *tr_multi_init(void) { return tr_curl_api()->multi_init(); }
static inline CURLMcode tr_multi_cleanup(CURLM *multi) { return tr_curl_api()->multi_cleanup(multi); }
static inline CURLMcode tr_multi_perform(CURLM *multi, int *running) { return tr_curl_api()->multi_perform(multi, running); }
static inline CURLMcode tr_multi_poll(CURLM *multi, struct curl_waitfd *fds, unsigned int count, int timeout, int *ready) {
    return tr_curl_api()->multi_poll(multi, fds, count, timeout, ready);
}
static inline CURLMcode tr_multi_add_handle(CURLM *multi, CURL *easy) { return tr_curl_api()->multi_add_handle(multi, easy); }
static inline CURLMcode tr_multi_remove_handle(CURLM *multi, CURL *easy) { return tr_curl_api()->multi_remove_handle(multi, easy); }
static inline CURLMsg *tr_multi_info_read(CURLM *multi, int *remaining) { return tr_curl_api()->multi_info_read(multi, remaining); }
static inline CURL *tr_easy_init(void) { return tr_curl_api()->easy_init(); }
static inline void tr_easy_cleanup(CURL *easy) { tr_curl_api()->easy_cleanup(easy); }
static inline CURLcode tr_easy_pause(CURL *easy, int mask) { return tr_curl_api()->easy_pause(easy, mask); }
static inline const char *tr_easy_strerror(CURLcode code) { return tr_curl_api()->easy_strerror(code); }
static inline struct curl_slist *tr_slist_append(struct curl_slist *list, const char *text) {
    return tr_curl_api()->slist_append(list, text);
}
static inline void tr_slist_free_all(struct curl_slist *list) { tr_curl_api()->slist_free_all(list); }

/* The URL API (curl_url): the parser libcurl itself uses for CURLOPT_URL / CURLOPT_CURLU. */
static inline CURLU *tr_url(void) { return tr_curl_api()->url(); }
static inline void tr_url_cleanup(CURLU *handle) { tr_curl_api()->url_cleanup(handle); }
static inline CURLUcode tr_url_set(CURLU *handle, CURLUPart part, const char *content, unsigned int flags) {
    return tr_curl_api()->url_set(handle, part, content, flags);
}
static inline CURLUcode tr_url_get(const CURLU *handle, CURLUPart part, char **content, unsigned int flags) {
    return tr_curl_api()->url_get(handle, part, content, flags);
}
static inline const char *tr_url_strerror(CURLUcode code) { return tr_curl_api()->url_strerror(code); }
/** Frees memory libcurl returned (curl_url_get parts). */
static inline void tr_curl_free(void *pointer) { tr_curl_api()->free(pointer); }

/* CURLU_* flags as unsigned ints (Swift imports the macros as Int32). */
static inline unsigned int tr_urlflag_disallow_user(void) { return CURLU_DISALLOW_USER; }
static inline unsigned int tr_urlflag_default_port(void) { return CURLU_DEFAULT_PORT; }

/*
 * Typed wrappers around libcurl's variadic entry points, which Swift cannot call directly.
 * Each wrapper passes exactly the argument type the option documents.
 */

/** Write/header callback: (data, size, nmemb, userdata) -> bytes taken. */
typedef size_t (*tr_curl_data_callback)(char *data, size_t size, size_t nmemb, void *userdata);

static inline CURLcode tr_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return tr_curl_api()->easy_setopt(handle, option, value);
}

static inline CURLcode tr_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return tr_curl_api()->easy_setopt(handle, option, value);
}

static inline CURLcode tr_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return tr_curl_api()->easy_setopt(handle, option, value);
}

static inline CURLcode tr_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return tr_curl_api()->easy_setopt(handle, option, value);
}

static inline CURLcode tr_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return tr_curl_api()->easy_setopt(handle, option, value);
}

/** A blob option (CURLOPT_SSLCERT_BLOB, CURLOPT_SSLKEY_BLOB), copied by libcurl; NULL data clears it. */
static inline CURLcode tr_easy_setopt_blob(CURL *handle, CURLoption option, const void *data, size_t length) {
    if (data == NULL) {
        return tr_curl_api()->easy_setopt(handle, option, (struct curl_blob *)NULL);
    }
    struct curl_blob blob = { (void *)data, length, CURL_BLOB_COPY };
    return tr_curl_api()->easy_setopt(handle, option, &blob);
}

static inline CURLcode tr_easy_setopt_data_callback(CURL *handle, CURLoption option, tr_curl_data_callback value) {
    return tr_curl_api()->easy_setopt(handle, option, value);
}

static inline CURLcode tr_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return tr_curl_api()->easy_getinfo(handle, info, value);
}

static inline CURLcode tr_easy_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value) {
    return tr_curl_api()->easy_getinfo(handle, info, value);
}

static inline CURLcode tr_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return tr_curl_api()->easy_getinfo(handle, info, value);
}

static inline CURLMcode tr_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return tr_curl_api()->multi_setopt(multi, option, value);
}

/** The result code of a CURLMSG_DONE message. */
static inline CURLcode tr_msg_result(const CURLMsg *message) {
    return message->data.result;
}

/** Whether `message` reports a finished transfer. */
static inline int tr_msg_is_done(const CURLMsg *message) {
    return message->msg == CURLMSG_DONE;
}

/** The value a write callback returns to pause the transfer (libcurl keeps the data). */
static inline size_t tr_writefunc_pause(void) { return CURL_WRITEFUNC_PAUSE; }

/** The values a read callback returns to pause the upload (until unpaused) or to abort it. */
static inline size_t tr_readfunc_pause(void) { return CURL_READFUNC_PAUSE; }
static inline size_t tr_readfunc_abort(void) { return CURL_READFUNC_ABORT; }

/** Unpause both directions. */
static inline int tr_pause_cont(void) { return CURLPAUSE_CONT; }

/** CURL_ERROR_SIZE, the size of an error buffer. */
static inline int tr_error_size(void) { return CURL_ERROR_SIZE; }

#include <curl/curl.h>

/*
 * Typed wrappers around libcurl's variadic entry points, which Swift cannot call directly.
 * Each wrapper passes exactly the argument type the option documents.
 */

/** Write/header callback: (data, size, nmemb, userdata) -> bytes taken. */
typedef size_t (*tr_curl_data_callback)(char *data, size_t size, size_t nmemb, void *userdata);

static inline CURLcode tr_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tr_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tr_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tr_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tr_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tr_easy_setopt_data_callback(CURL *handle, CURLoption option, tr_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tr_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode tr_easy_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode tr_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode tr_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
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

/** Unpause both directions. */
static inline int tr_pause_cont(void) { return CURLPAUSE_CONT; }

/** CURL_ERROR_SIZE, the size of an error buffer. */
static inline int tr_error_size(void) { return CURL_ERROR_SIZE; }

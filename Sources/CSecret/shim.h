#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

/*
 * The freedesktop Secret Service (D-Bus org.freedesktop.secrets: GNOME Keyring, KeePassXC,
 * KWallet) through libsecret, loaded with dlopen on first use like libcurl (Sources/CCurl/shim.h)
 * and libsqlite3 (Sources/CSQLite/shim.h): only a process that opens a store without a configured
 * key maps it. No header of libsecret or GLib is needed (Debian's libsecret-1-0 is enough): the few
 * types used are declared here as the libraries define them (GError's three fields, GList's
 * three; everything else is opaque).
 *
 * Call tr_secret_load() first; it returns 0 when libsecret-1.so.0 or one of its symbols is
 * missing. Thread-safe (pthread_once). The table and its once-control are one per process (weak
 * definitions), as in Sources/CCurl/shim.h, which says why.
 *
 * Nothing here ever prompts: no call passes an UNLOCK flag or performs a SecretPrompt, so a
 * locked collection or item is reported (TR_SECRET_LOCKED), never unlocked.
 */
typedef struct { unsigned int domain; int code; char *message; } tr_secret_gerror;
typedef struct tr_secret_glist { void *data; struct tr_secret_glist *next; struct tr_secret_glist *prev; } tr_secret_glist;

struct tr_secret_api {
    void *(*service_get_sync)(int, void *, tr_secret_gerror **);
    tr_secret_glist *(*service_search_sync)(void *, const void *, void *, int, void *, tr_secret_gerror **);
    void *(*collection_for_alias_sync)(void *, const char *, int, void *, tr_secret_gerror **);
    int (*collection_get_locked)(void *);
    int (*item_get_locked)(void *);
    void *(*item_get_secret)(void *);
    void *(*item_create_sync)(void *, const void *, void *, const char *, void *, int, void *, tr_secret_gerror **);
    int (*item_delete_sync)(void *, void *, tr_secret_gerror **);
    const char *(*value_get)(void *, size_t *);
    void *(*value_new)(const char *, long, const char *);
    void (*value_unref)(void *);
    void *(*hash_table_new)(unsigned int (*)(const void *), int (*)(const void *, const void *));
    int (*hash_table_insert)(void *, void *, void *);
    void (*hash_table_unref)(void *);
    unsigned int (*str_hash)(const void *);
    int (*str_equal)(const void *, const void *);
    void (*object_unref)(void *);
    void (*list_free)(tr_secret_glist *);
    void (*error_free)(tr_secret_gerror *);
    int loaded;
};

__attribute__((weak)) struct tr_secret_api tr_secret_shared_table = {0};
__attribute__((weak)) pthread_once_t tr_secret_shared_once = PTHREAD_ONCE_INIT;

static inline struct tr_secret_api *tr_secret_table(void) { return &tr_secret_shared_table; }

static inline void tr_secret_load_once(void) {
    struct tr_secret_api *api = tr_secret_table();
    void *library = dlopen("libsecret-1.so.0", RTLD_LAZY | RTLD_LOCAL);
    if (!library) return;
    /* GLib's and GObject's symbols are found through libsecret's own dependencies. */
#define TR_SECRET_SYMBOL(field, name) \
    *(void **)(&api->field) = dlsym(library, name); \
    if (!api->field) return;
    TR_SECRET_SYMBOL(service_get_sync, "secret_service_get_sync")
    TR_SECRET_SYMBOL(service_search_sync, "secret_service_search_sync")
    TR_SECRET_SYMBOL(collection_for_alias_sync, "secret_collection_for_alias_sync")
    TR_SECRET_SYMBOL(collection_get_locked, "secret_collection_get_locked")
    TR_SECRET_SYMBOL(item_get_locked, "secret_item_get_locked")
    TR_SECRET_SYMBOL(item_get_secret, "secret_item_get_secret")
    TR_SECRET_SYMBOL(item_create_sync, "secret_item_create_sync")
    TR_SECRET_SYMBOL(item_delete_sync, "secret_item_delete_sync")
    TR_SECRET_SYMBOL(value_get, "secret_value_get")
    TR_SECRET_SYMBOL(value_new, "secret_value_new")
    TR_SECRET_SYMBOL(value_unref, "secret_value_unref")
    TR_SECRET_SYMBOL(hash_table_new, "g_hash_table_new")
    TR_SECRET_SYMBOL(hash_table_insert, "g_hash_table_insert")
    TR_SECRET_SYMBOL(hash_table_unref, "g_hash_table_unref")
    TR_SECRET_SYMBOL(str_hash, "g_str_hash")
    TR_SECRET_SYMBOL(str_equal, "g_str_equal")
    TR_SECRET_SYMBOL(object_unref, "g_object_unref")
    TR_SECRET_SYMBOL(list_free, "g_list_free")
    TR_SECRET_SYMBOL(error_free, "g_error_free")
#undef TR_SECRET_SYMBOL
    api->loaded = 1;
}

static inline struct tr_secret_api *tr_secret_api(void) {
    pthread_once(&tr_secret_shared_once, tr_secret_load_once);
    return tr_secret_table();
}

/** Loads libsecret (once); 1 when every entry point was found. */
static inline int tr_secret_load(void) { return tr_secret_api()->loaded; }

/* What a call found. */
enum {
    TR_SECRET_FOUND = 0,       /* lookup: the item's value was copied out; create/delete: done */
    TR_SECRET_ABSENT = 1,      /* no item has the attributes (delete: nothing to remove) */
    TR_SECRET_UNREACHABLE = 2, /* no secret service on the bus (message says why) */
    TR_SECRET_LOCKED = 3,      /* the item, or the default collection, is locked */
    TR_SECRET_NO_COLLECTION = 4, /* create: the service has no default collection */
    TR_SECRET_SEVERAL = 5,     /* lookup: more than one item has the attributes */
    TR_SECRET_FAILED = 6,      /* anything else (message says what) */
    TR_SECRET_TOO_LONG = 7     /* lookup: the value does not fit the caller's buffer */
};

/* libsecret's flag values (secret-service.h, secret-collection.h, secret-item.h). */
#define TR_SECRET_SERVICE_OPEN_SESSION (1 << 1)
#define TR_SECRET_SEARCH_ALL (1 << 1)
#define TR_SECRET_SEARCH_LOAD_SECRETS (1 << 3)

static inline void tr_secret_message(tr_secret_gerror *error, char *message, size_t capacity) {
    if (!message || capacity == 0) return;
    message[0] = 0;
    if (error && error->message) {
        strncpy(message, error->message, capacity - 1);
        message[capacity - 1] = 0;
    }
    if (error) tr_secret_api()->error_free(error);
}

/* The service, with a transfer session open (so values travel encrypted on the bus). */
static inline void *tr_secret_service(char *message, size_t capacity) {
    tr_secret_gerror *error = NULL;
    void *service = tr_secret_api()->service_get_sync(TR_SECRET_SERVICE_OPEN_SESSION, NULL, &error);
    if (!service) tr_secret_message(error, message, capacity);
    else if (error) tr_secret_api()->error_free(error);
    return service;
}

static inline void *tr_secret_attributes(const char *application, const char *store) {
    struct tr_secret_api *api = tr_secret_api();
    void *attributes = api->hash_table_new(api->str_hash, api->str_equal);
    api->hash_table_insert(attributes, (void *)"application", (void *)application);
    api->hash_table_insert(attributes, (void *)"store", (void *)store);
    return attributes;
}

/* Every item (locked or not) whose attributes are application and store, secrets loaded where
 * unlocked; NULL with *status set when there are none or the search failed. */
static inline tr_secret_glist *tr_secret_search(void *service, const char *application, const char *store,
                                                int *status, char *message, size_t capacity) {
    struct tr_secret_api *api = tr_secret_api();
    void *attributes = tr_secret_attributes(application, store);
    tr_secret_gerror *error = NULL;
    tr_secret_glist *items = api->service_search_sync(
        service, NULL, attributes, TR_SECRET_SEARCH_ALL | TR_SECRET_SEARCH_LOAD_SECRETS, NULL, &error);
    api->hash_table_unref(attributes);
    if (error) {
        tr_secret_message(error, message, capacity);
        *status = TR_SECRET_FAILED;
    } else {
        *status = items ? TR_SECRET_FOUND : TR_SECRET_ABSENT;
    }
    return items;
}

static inline void tr_secret_free_items(tr_secret_glist *items) {
    struct tr_secret_api *api = tr_secret_api();
    for (tr_secret_glist *item = items; item; item = item->next) api->object_unref(item->data);
    api->list_free(items);
}

/** The value of the one item with these attributes, copied into `out` (`*length` bytes). */
static inline int tr_secret_lookup(const char *application, const char *store, char *out, size_t capacity,
                                   size_t *length, char *message, size_t message_capacity) {
    struct tr_secret_api *api = tr_secret_api();
    *length = 0;
    void *service = tr_secret_service(message, message_capacity);
    if (!service) return TR_SECRET_UNREACHABLE;
    int status = TR_SECRET_FAILED;
    tr_secret_glist *items = tr_secret_search(service, application, store, &status, message, message_capacity);
    if (status == TR_SECRET_FOUND) {
        if (items->next) {
            status = TR_SECRET_SEVERAL;
        } else if (api->item_get_locked(items->data)) {
            status = TR_SECRET_LOCKED;
        } else {
            void *value = api->item_get_secret(items->data);
            if (!value) {
                status = TR_SECRET_LOCKED;
            } else {
                size_t size = 0;
                const char *bytes = api->value_get(value, &size);
                if (size > capacity) {
                    status = TR_SECRET_TOO_LONG;
                } else {
                    memcpy(out, bytes, size);
                    *length = size;
                }
                api->value_unref(value);
            }
        }
    }
    tr_secret_free_items(items);
    api->object_unref(service);
    return status;
}

/** Stores `value` (text) as a new item of the default collection, unless it is locked or absent. */
static inline int tr_secret_create(const char *application, const char *store, const char *label, const char *value,
                                   char *message, size_t message_capacity) {
    struct tr_secret_api *api = tr_secret_api();
    void *service = tr_secret_service(message, message_capacity);
    if (!service) return TR_SECRET_UNREACHABLE;
    tr_secret_gerror *error = NULL;
    void *collection = api->collection_for_alias_sync(service, "default", 0, NULL, &error);
    int status = TR_SECRET_FOUND;
    if (error) {
        tr_secret_message(error, message, message_capacity);
        status = TR_SECRET_FAILED;
    } else if (!collection) {
        status = TR_SECRET_NO_COLLECTION;
    } else if (api->collection_get_locked(collection)) {
        status = TR_SECRET_LOCKED;
    } else {
        void *attributes = tr_secret_attributes(application, store);
        void *secret = api->value_new(value, -1, "text/plain");
        void *item = api->item_create_sync(collection, NULL, attributes, label, secret, 0, NULL, &error);
        api->value_unref(secret);
        api->hash_table_unref(attributes);
        if (item) api->object_unref(item);
        if (error) {
            tr_secret_message(error, message, message_capacity);
            status = TR_SECRET_FAILED;
        }
    }
    if (collection) api->object_unref(collection);
    api->object_unref(service);
    return status;
}

/** Removes every item with these attributes (TR_SECRET_ABSENT: there was none). */
static inline int tr_secret_delete(const char *application, const char *store, char *message,
                                   size_t message_capacity) {
    struct tr_secret_api *api = tr_secret_api();
    void *service = tr_secret_service(message, message_capacity);
    if (!service) return TR_SECRET_UNREACHABLE;
    int status = TR_SECRET_FAILED;
    tr_secret_glist *items = tr_secret_search(service, application, store, &status, message, message_capacity);
    for (tr_secret_glist *item = items; item && status == TR_SECRET_FOUND; item = item->next) {
        tr_secret_gerror *error = NULL;
        if (api->item_get_locked(item->data)) {
            status = TR_SECRET_LOCKED; /* deleting it could ask for a prompt */
        } else if (!api->item_delete_sync(item->data, NULL, &error)) {
            tr_secret_message(error, message, message_capacity);
            status = TR_SECRET_FAILED;
        } else if (error) {
            api->error_free(error);
        }
    }
    tr_secret_free_items(items);
    api->object_unref(service);
    return status;
}

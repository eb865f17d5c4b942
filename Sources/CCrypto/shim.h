#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <openssl/core_names.h>
#include <openssl/rsa.h>
#include <openssl/bn.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/x509.h>
#include <dlfcn.h>
#include <string.h>
#include <pthread.h>

/*
 * libcrypto is loaded with dlopen on first use instead of being linked, like libcurl
 * (Sources/CCurl/shim.h) and libsqlite3 (Sources/CSQLite/shim.h): most starts (initialize, ping,
 * check-config, a static token, a memory store) never verify a signature, seal a stored token or
 * make a PKCE secret, and mapping libcrypto at exec costs every start about a millisecond.
 * tr_crypto_load() returns 0 when libcrypto.so.3 or one of its symbols is missing; then every
 * tr_ wrapper below returns its failure value (0 or NULL) without calling anything, so callers
 * need no separate check beyond the results they already test. Thread-safe (pthread_once).
 * Opened with RTLD_LAZY, like libcurl (Sources/CCurl/shim.h).
 *
 * The functions are copied into every module (and file) that calls them; the table and its
 * once-control are one per process (weak definitions), as in Sources/CCurl/shim.h, which says
 * why. Every wrapper goes through pthread_once (one check). The headers are included for
 * the types and constants only; nothing here links against libcrypto (tests that call libcrypto
 * directly link it themselves). SwiftPM does not track this header: after editing it, touch the
 * Swift files that import CCrypto (or build clean).
 */
struct tr_crypto_api {
    int (*rand_bytes)(unsigned char *buf, int num);
    unsigned char *(*sha256)(const unsigned char *d, size_t n, unsigned char *md);
    /* Optional (the deprecated low-level API; NULL in a libcrypto built without it). */
    int (*sha256_init)(SHA256_CTX *c);
    int (*sha256_update)(SHA256_CTX *c, const void *data, size_t len);
    int (*sha256_final)(unsigned char *md, SHA256_CTX *c);
    void (*err_clear_error)(void);
    const EVP_MD *(*evp_sha256)(void);
    const EVP_CIPHER *(*evp_aes_256_gcm)(void);
    EVP_MD_CTX *(*evp_md_ctx_new)(void);
    void (*evp_md_ctx_free)(EVP_MD_CTX *ctx);
    int (*evp_digestverifyinit)(EVP_MD_CTX *ctx, EVP_PKEY_CTX **pctx, const EVP_MD *type, ENGINE *e, EVP_PKEY *pkey);
    int (*evp_digestverify)(EVP_MD_CTX *ctx, const unsigned char *sigret, size_t siglen, const unsigned char *tbs, size_t tbslen);
    int (*evp_pkey_ctx_set_rsa_padding)(EVP_PKEY_CTX *ctx, int pad_mode);
    int (*evp_pkey_ctx_set_rsa_pss_saltlen)(EVP_PKEY_CTX *ctx, int saltlen);
    void (*evp_pkey_free)(EVP_PKEY *pkey);
    EVP_PKEY_CTX *(*evp_pkey_ctx_new_from_name)(OSSL_LIB_CTX *libctx, const char *name, const char *propquery);
    void (*evp_pkey_ctx_free)(EVP_PKEY_CTX *ctx);
    int (*evp_pkey_fromdata_init)(EVP_PKEY_CTX *ctx);
    int (*evp_pkey_fromdata)(EVP_PKEY_CTX *ctx, EVP_PKEY **ppkey, int selection, OSSL_PARAM param[]);
    OSSL_PARAM_BLD *(*ossl_param_bld_new)(void);
    void (*ossl_param_bld_free)(OSSL_PARAM_BLD *bld);
    int (*ossl_param_bld_push_bn)(OSSL_PARAM_BLD *bld, const char *key, const BIGNUM *bn);
    int (*ossl_param_bld_push_utf8_string)(OSSL_PARAM_BLD *bld, const char *key, const char *buf, size_t bsize);
    int (*ossl_param_bld_push_octet_string)(OSSL_PARAM_BLD *bld, const char *key, const void *buf, size_t bsize);
    OSSL_PARAM *(*ossl_param_bld_to_param)(OSSL_PARAM_BLD *bld);
    void (*ossl_param_free)(OSSL_PARAM *params);
    BIGNUM *(*bn_bin2bn)(const unsigned char *s, int len, BIGNUM *ret);
    void (*bn_free)(BIGNUM *a);
    EVP_CIPHER_CTX *(*evp_cipher_ctx_new)(void);
    void (*evp_cipher_ctx_free)(EVP_CIPHER_CTX *ctx);
    int (*evp_cipher_ctx_ctrl)(EVP_CIPHER_CTX *ctx, int type, int arg, void *ptr);
    int (*evp_encryptinit_ex)(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, ENGINE *impl, const unsigned char *key, const unsigned char *iv);
    int (*evp_encryptupdate)(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl);
    int (*evp_encryptfinal_ex)(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl);
    int (*evp_decryptinit_ex)(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, ENGINE *impl, const unsigned char *key, const unsigned char *iv);
    int (*evp_decryptupdate)(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl);
    int (*evp_decryptfinal_ex)(EVP_CIPHER_CTX *ctx, unsigned char *outm, int *outl);
    /* Private keys and signatures (client assertions, DPoP proofs). */
    BIO *(*bio_new_mem_buf)(const void *buf, int len);
    int (*bio_free)(BIO *a);
    EVP_PKEY *(*pem_read_bio_privatekey)(BIO *bp, EVP_PKEY **x, pem_password_cb *cb, void *u);
    int (*evp_digestsigninit)(EVP_MD_CTX *ctx, EVP_PKEY_CTX **pctx, const EVP_MD *type, ENGINE *e, EVP_PKEY *pkey);
    int (*evp_digestsign)(EVP_MD_CTX *ctx, unsigned char *sigret, size_t *siglen, const unsigned char *tbs, size_t tbslen);
    int (*evp_pkey_is_a)(const EVP_PKEY *pkey, const char *name);
    int (*evp_pkey_get_bits)(const EVP_PKEY *pkey);
    int (*evp_pkey_get_utf8_string_param)(const EVP_PKEY *pkey, const char *key_name, char *str, size_t max_buf_sz, size_t *out_len);
    int (*evp_pkey_get_octet_string_param)(const EVP_PKEY *pkey, const char *key_name, unsigned char *buf, size_t max_buf_sz, size_t *out_len);
    int (*evp_pkey_keygen_init)(EVP_PKEY_CTX *ctx);
    int (*evp_pkey_ctx_set_group_name)(EVP_PKEY_CTX *ctx, const char *name);
    int (*evp_pkey_generate)(EVP_PKEY_CTX *ctx, EVP_PKEY **ppkey);
    int (*i2d_privatekey)(const EVP_PKEY *a, unsigned char **pp);
    EVP_PKEY *(*d2i_autoprivatekey)(EVP_PKEY **a, const unsigned char **pp, long length);
    /* Client certificates (mutual TLS), read as libcurl reads them. */
    X509 *(*pem_read_bio_x509_aux)(BIO *bp, X509 **x, pem_password_cb *cb, void *u);
    X509 *(*pem_read_bio_x509)(BIO *bp, X509 **x, pem_password_cb *cb, void *u);
    void (*x509_free)(X509 *a);
    int (*x509_check_private_key)(const X509 *x, const EVP_PKEY *k);
    unsigned long (*err_peek_last_error)(void);
    int loaded;
};

/*
 * The process's one table and once-control. Weak definitions: every object that uses them emits
 * one and the linker keeps a single one, so all copies of the functions below share them.
 */
__attribute__((weak)) struct tr_crypto_api tr_crypto_shared_table = {0};
__attribute__((weak)) pthread_once_t tr_crypto_shared_once = PTHREAD_ONCE_INIT;

static inline struct tr_crypto_api *tr_crypto_table(void) { return &tr_crypto_shared_table; }

static inline void tr_crypto_load_once(void) {
    struct tr_crypto_api *api = tr_crypto_table();
    void *library = dlopen("libcrypto.so.3", RTLD_LAZY | RTLD_LOCAL);
    if (!library) return;
#define TR_CRYPTO_SYMBOL(field, name) \
    *(void **)(&api->field) = dlsym(library, name); \
    if (!api->field) return;
    TR_CRYPTO_SYMBOL(rand_bytes, "RAND_bytes")
    TR_CRYPTO_SYMBOL(sha256, "SHA256")
    TR_CRYPTO_SYMBOL(err_clear_error, "ERR_clear_error")
    TR_CRYPTO_SYMBOL(evp_sha256, "EVP_sha256")
    TR_CRYPTO_SYMBOL(evp_aes_256_gcm, "EVP_aes_256_gcm")
    TR_CRYPTO_SYMBOL(evp_md_ctx_new, "EVP_MD_CTX_new")
    TR_CRYPTO_SYMBOL(evp_md_ctx_free, "EVP_MD_CTX_free")
    TR_CRYPTO_SYMBOL(evp_digestverifyinit, "EVP_DigestVerifyInit")
    TR_CRYPTO_SYMBOL(evp_digestverify, "EVP_DigestVerify")
    TR_CRYPTO_SYMBOL(evp_pkey_ctx_set_rsa_padding, "EVP_PKEY_CTX_set_rsa_padding")
    TR_CRYPTO_SYMBOL(evp_pkey_ctx_set_rsa_pss_saltlen, "EVP_PKEY_CTX_set_rsa_pss_saltlen")
    TR_CRYPTO_SYMBOL(evp_pkey_free, "EVP_PKEY_free")
    TR_CRYPTO_SYMBOL(evp_pkey_ctx_new_from_name, "EVP_PKEY_CTX_new_from_name")
    TR_CRYPTO_SYMBOL(evp_pkey_ctx_free, "EVP_PKEY_CTX_free")
    TR_CRYPTO_SYMBOL(evp_pkey_fromdata_init, "EVP_PKEY_fromdata_init")
    TR_CRYPTO_SYMBOL(evp_pkey_fromdata, "EVP_PKEY_fromdata")
    TR_CRYPTO_SYMBOL(ossl_param_bld_new, "OSSL_PARAM_BLD_new")
    TR_CRYPTO_SYMBOL(ossl_param_bld_free, "OSSL_PARAM_BLD_free")
    TR_CRYPTO_SYMBOL(ossl_param_bld_push_bn, "OSSL_PARAM_BLD_push_BN")
    TR_CRYPTO_SYMBOL(ossl_param_bld_push_utf8_string, "OSSL_PARAM_BLD_push_utf8_string")
    TR_CRYPTO_SYMBOL(ossl_param_bld_push_octet_string, "OSSL_PARAM_BLD_push_octet_string")
    TR_CRYPTO_SYMBOL(ossl_param_bld_to_param, "OSSL_PARAM_BLD_to_param")
    TR_CRYPTO_SYMBOL(ossl_param_free, "OSSL_PARAM_free")
    TR_CRYPTO_SYMBOL(bn_bin2bn, "BN_bin2bn")
    TR_CRYPTO_SYMBOL(bn_free, "BN_free")
    TR_CRYPTO_SYMBOL(evp_cipher_ctx_new, "EVP_CIPHER_CTX_new")
    TR_CRYPTO_SYMBOL(evp_cipher_ctx_free, "EVP_CIPHER_CTX_free")
    TR_CRYPTO_SYMBOL(evp_cipher_ctx_ctrl, "EVP_CIPHER_CTX_ctrl")
    TR_CRYPTO_SYMBOL(evp_encryptinit_ex, "EVP_EncryptInit_ex")
    TR_CRYPTO_SYMBOL(evp_encryptupdate, "EVP_EncryptUpdate")
    TR_CRYPTO_SYMBOL(evp_encryptfinal_ex, "EVP_EncryptFinal_ex")
    TR_CRYPTO_SYMBOL(evp_decryptinit_ex, "EVP_DecryptInit_ex")
    TR_CRYPTO_SYMBOL(evp_decryptupdate, "EVP_DecryptUpdate")
    TR_CRYPTO_SYMBOL(evp_decryptfinal_ex, "EVP_DecryptFinal_ex")
    TR_CRYPTO_SYMBOL(bio_new_mem_buf, "BIO_new_mem_buf")
    TR_CRYPTO_SYMBOL(bio_free, "BIO_free")
    TR_CRYPTO_SYMBOL(pem_read_bio_privatekey, "PEM_read_bio_PrivateKey")
    TR_CRYPTO_SYMBOL(evp_digestsigninit, "EVP_DigestSignInit")
    TR_CRYPTO_SYMBOL(evp_digestsign, "EVP_DigestSign")
    TR_CRYPTO_SYMBOL(evp_pkey_is_a, "EVP_PKEY_is_a")
    TR_CRYPTO_SYMBOL(evp_pkey_get_bits, "EVP_PKEY_get_bits")
    TR_CRYPTO_SYMBOL(evp_pkey_get_utf8_string_param, "EVP_PKEY_get_utf8_string_param")
    TR_CRYPTO_SYMBOL(evp_pkey_get_octet_string_param, "EVP_PKEY_get_octet_string_param")
    TR_CRYPTO_SYMBOL(evp_pkey_keygen_init, "EVP_PKEY_keygen_init")
    TR_CRYPTO_SYMBOL(evp_pkey_ctx_set_group_name, "EVP_PKEY_CTX_set_group_name")
    TR_CRYPTO_SYMBOL(evp_pkey_generate, "EVP_PKEY_generate")
    TR_CRYPTO_SYMBOL(i2d_privatekey, "i2d_PrivateKey")
    TR_CRYPTO_SYMBOL(d2i_autoprivatekey, "d2i_AutoPrivateKey")
    TR_CRYPTO_SYMBOL(pem_read_bio_x509_aux, "PEM_read_bio_X509_AUX")
    TR_CRYPTO_SYMBOL(pem_read_bio_x509, "PEM_read_bio_X509")
    TR_CRYPTO_SYMBOL(x509_free, "X509_free")
    TR_CRYPTO_SYMBOL(x509_check_private_key, "X509_check_private_key")
    TR_CRYPTO_SYMBOL(err_peek_last_error, "ERR_peek_last_error")
#undef TR_CRYPTO_SYMBOL
    *(void **)(&api->sha256_init) = dlsym(library, "SHA256_Init");
    *(void **)(&api->sha256_update) = dlsym(library, "SHA256_Update");
    *(void **)(&api->sha256_final) = dlsym(library, "SHA256_Final");
    api->loaded = 1;
}

/** The table, loaded (once per process) first. */
static inline struct tr_crypto_api *tr_crypto_api(void) {
    pthread_once(&tr_crypto_shared_once, tr_crypto_load_once);
    return tr_crypto_table();
}

/** Loads libcrypto (once); 1 when every entry point was found. */
static inline int tr_crypto_load(void) { return tr_crypto_api()->loaded; }

static inline int tr_RAND_bytes(unsigned char *buf, int num) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->rand_bytes(buf, num) : 0; }
/*
 * SHA-256 through the digest's own functions when libcrypto has them, not the one-shot SHA256():
 * in OpenSSL 3 that goes through EVP_Q_digest, which on first use initialises the library
 * (reading openssl.cnf) and fetches the default provider's implementation, ~1.3 ms in a fresh
 * process against ~15 us here (the same code computes the digest either way). A store key is
 * hashed at every start that reads a stored session. The context, which holds the input's last
 * block (a whole PKCE verifier), is wiped.
 */
static inline unsigned char *tr_SHA256(const unsigned char *d, size_t n, unsigned char *md) {
    struct tr_crypto_api *api = tr_crypto_api();
    if (!api->loaded) return NULL;
    if (!api->sha256_init || !api->sha256_update || !api->sha256_final) return api->sha256(d, n, md);
    SHA256_CTX context;
    int ok = api->sha256_init(&context) == 1 && api->sha256_update(&context, d, n) == 1
        && api->sha256_final(md, &context) == 1;
    explicit_bzero(&context, sizeof context);
    return ok ? md : NULL;
}
static inline void tr_ERR_clear_error(void) { struct tr_crypto_api *api = tr_crypto_api(); if (api->loaded) api->err_clear_error(); }
static inline const EVP_MD *tr_EVP_sha256(void) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_sha256() : NULL; }
static inline const EVP_CIPHER *tr_EVP_aes_256_gcm(void) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_aes_256_gcm() : NULL; }
static inline EVP_MD_CTX *tr_EVP_MD_CTX_new(void) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_md_ctx_new() : NULL; }
static inline void tr_EVP_MD_CTX_free(EVP_MD_CTX *ctx) { struct tr_crypto_api *api = tr_crypto_api(); if (api->loaded) api->evp_md_ctx_free(ctx); }
static inline int tr_EVP_DigestVerifyInit(EVP_MD_CTX *ctx, EVP_PKEY_CTX **pctx, const EVP_MD *type, ENGINE *e, EVP_PKEY *pkey) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_digestverifyinit(ctx, pctx, type, e, pkey) : 0; }
static inline int tr_EVP_DigestVerify(EVP_MD_CTX *ctx, const unsigned char *sigret, size_t siglen, const unsigned char *tbs, size_t tbslen) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_digestverify(ctx, sigret, siglen, tbs, tbslen) : 0; }
static inline int tr_EVP_PKEY_CTX_set_rsa_padding(EVP_PKEY_CTX *ctx, int pad_mode) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_pkey_ctx_set_rsa_padding(ctx, pad_mode) : 0; }
static inline int tr_EVP_PKEY_CTX_set_rsa_pss_saltlen(EVP_PKEY_CTX *ctx, int saltlen) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_pkey_ctx_set_rsa_pss_saltlen(ctx, saltlen) : 0; }
static inline void tr_EVP_PKEY_free(EVP_PKEY *pkey) { struct tr_crypto_api *api = tr_crypto_api(); if (api->loaded) api->evp_pkey_free(pkey); }
static inline EVP_PKEY_CTX *tr_EVP_PKEY_CTX_new_from_name(OSSL_LIB_CTX *libctx, const char *name, const char *propquery) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_pkey_ctx_new_from_name(libctx, name, propquery) : NULL; }
static inline void tr_EVP_PKEY_CTX_free(EVP_PKEY_CTX *ctx) { struct tr_crypto_api *api = tr_crypto_api(); if (api->loaded) api->evp_pkey_ctx_free(ctx); }
static inline int tr_EVP_PKEY_fromdata_init(EVP_PKEY_CTX *ctx) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_pkey_fromdata_init(ctx) : 0; }
static inline int tr_EVP_PKEY_fromdata(EVP_PKEY_CTX *ctx, EVP_PKEY **ppkey, int selection, OSSL_PARAM param[]) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_pkey_fromdata(ctx, ppkey, selection, param) : 0; }
static inline OSSL_PARAM_BLD *tr_OSSL_PARAM_BLD_new(void) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->ossl_param_bld_new() : NULL; }
static inline void tr_OSSL_PARAM_BLD_free(OSSL_PARAM_BLD *bld) { struct tr_crypto_api *api = tr_crypto_api(); if (api->loaded) api->ossl_param_bld_free(bld); }
static inline int tr_OSSL_PARAM_BLD_push_BN(OSSL_PARAM_BLD *bld, const char *key, const BIGNUM *bn) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->ossl_param_bld_push_bn(bld, key, bn) : 0; }
static inline int tr_OSSL_PARAM_BLD_push_utf8_string(OSSL_PARAM_BLD *bld, const char *key, const char *buf, size_t bsize) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->ossl_param_bld_push_utf8_string(bld, key, buf, bsize) : 0; }
static inline int tr_OSSL_PARAM_BLD_push_octet_string(OSSL_PARAM_BLD *bld, const char *key, const void *buf, size_t bsize) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->ossl_param_bld_push_octet_string(bld, key, buf, bsize) : 0; }
static inline OSSL_PARAM *tr_OSSL_PARAM_BLD_to_param(OSSL_PARAM_BLD *bld) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->ossl_param_bld_to_param(bld) : NULL; }
static inline void tr_OSSL_PARAM_free(OSSL_PARAM *params) { struct tr_crypto_api *api = tr_crypto_api(); if (api->loaded) api->ossl_param_free(params); }
static inline BIGNUM *tr_BN_bin2bn(const unsigned char *s, int len, BIGNUM *ret) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->bn_bin2bn(s, len, ret) : NULL; }
static inline void tr_BN_free(BIGNUM *a) { struct tr_crypto_api *api = tr_crypto_api(); if (api->loaded) api->bn_free(a); }
static inline EVP_CIPHER_CTX *tr_EVP_CIPHER_CTX_new(void) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_cipher_ctx_new() : NULL; }
static inline void tr_EVP_CIPHER_CTX_free(EVP_CIPHER_CTX *ctx) { struct tr_crypto_api *api = tr_crypto_api(); if (api->loaded) api->evp_cipher_ctx_free(ctx); }
static inline int tr_EVP_CIPHER_CTX_ctrl(EVP_CIPHER_CTX *ctx, int type, int arg, void *ptr) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_cipher_ctx_ctrl(ctx, type, arg, ptr) : 0; }
static inline int tr_EVP_EncryptInit_ex(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, ENGINE *impl, const unsigned char *key, const unsigned char *iv) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_encryptinit_ex(ctx, cipher, impl, key, iv) : 0; }
static inline int tr_EVP_EncryptUpdate(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_encryptupdate(ctx, out, outl, in, inl) : 0; }
static inline int tr_EVP_EncryptFinal_ex(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_encryptfinal_ex(ctx, out, outl) : 0; }
static inline int tr_EVP_DecryptInit_ex(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, ENGINE *impl, const unsigned char *key, const unsigned char *iv) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_decryptinit_ex(ctx, cipher, impl, key, iv) : 0; }
static inline int tr_EVP_DecryptUpdate(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_decryptupdate(ctx, out, outl, in, inl) : 0; }
static inline int tr_EVP_DecryptFinal_ex(EVP_CIPHER_CTX *ctx, unsigned char *outm, int *outl) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_decryptfinal_ex(ctx, outm, outl) : 0; }

/* A passphrase callback that refuses: an encrypted PEM key fails to load instead of OpenSSL asking
   for a passphrase on the terminal (a headless process has none to give). */
static inline int tokenrelay_no_passphrase(char *buf, int size, int rwflag, void *u) { (void)buf; (void)size; (void)rwflag; (void)u; return -1; }
/* The private key in PEM `text` (PKCS#8, SEC1 or PKCS#1; unencrypted only); NULL when none. */
static inline EVP_PKEY *tr_PEM_read_private_key(const unsigned char *text, int length) {
    struct tr_crypto_api *api = tr_crypto_api();
    if (!api->loaded) return NULL;
    BIO *bio = api->bio_new_mem_buf(text, length);
    if (!bio) return NULL;
    EVP_PKEY *key = api->pem_read_bio_privatekey(bio, NULL, tokenrelay_no_passphrase, NULL);
    api->bio_free(bio);
    return key;
}
static inline int tr_EVP_DigestSignInit(EVP_MD_CTX *ctx, EVP_PKEY_CTX **pctx, const EVP_MD *type, ENGINE *e, EVP_PKEY *pkey) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_digestsigninit(ctx, pctx, type, e, pkey) : 0; }
static inline int tr_EVP_DigestSign(EVP_MD_CTX *ctx, unsigned char *sigret, size_t *siglen, const unsigned char *tbs, size_t tbslen) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_digestsign(ctx, sigret, siglen, tbs, tbslen) : 0; }
static inline int tr_EVP_PKEY_is_a(const EVP_PKEY *pkey, const char *name) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_pkey_is_a(pkey, name) : 0; }
static inline int tr_EVP_PKEY_get_bits(const EVP_PKEY *pkey) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_pkey_get_bits(pkey) : 0; }
static inline int tr_EVP_PKEY_get_utf8_string_param(const EVP_PKEY *pkey, const char *key_name, char *str, size_t max_buf_sz, size_t *out_len) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_pkey_get_utf8_string_param(pkey, key_name, str, max_buf_sz, out_len) : 0; }
static inline int tr_EVP_PKEY_get_octet_string_param(const EVP_PKEY *pkey, const char *key_name, unsigned char *buf, size_t max_buf_sz, size_t *out_len) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_pkey_get_octet_string_param(pkey, key_name, buf, max_buf_sz, out_len) : 0; }
static inline int tr_EVP_PKEY_keygen_init(EVP_PKEY_CTX *ctx) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_pkey_keygen_init(ctx) : 0; }
static inline int tr_EVP_PKEY_CTX_set_group_name(EVP_PKEY_CTX *ctx, const char *name) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_pkey_ctx_set_group_name(ctx, name) : 0; }
static inline int tr_EVP_PKEY_generate(EVP_PKEY_CTX *ctx, EVP_PKEY **ppkey) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->evp_pkey_generate(ctx, ppkey) : 0; }
static inline int tr_i2d_PrivateKey(const EVP_PKEY *a, unsigned char **pp) { struct tr_crypto_api *api = tr_crypto_api(); return api->loaded ? api->i2d_privatekey(a, pp) : 0; }
static inline EVP_PKEY *tr_d2i_AutoPrivateKey(const unsigned char *bytes, long length) { struct tr_crypto_api *api = tr_crypto_api(); if (!api->loaded) return NULL; const unsigned char *p = bytes; return api->d2i_autoprivatekey(NULL, &p, length); }

/*
 * The certificate chain in PEM `text`, read as libcurl reads a client certificate blob
 * (lib/vtls/openssl.c, use_certificate_chain_blob): the first certificate with
 * PEM_read_bio_X509_AUX, then further ones with PEM_read_bio_X509 until the text holds no more
 * (the last error PEM_R_NO_START_LINE; any other error is a damaged certificate). Returns the number
 * of certificates, 0 when the first cannot be read, -1 when a later one cannot, -2 when libcrypto is
 * not loaded. With `key`, *matches is 1 when it is the first certificate's private key
 * (X509_check_private_key, what SSL_CTX_check_private_key asks), else 0.
 */
static inline int tr_PEM_read_certificate_chain(const unsigned char *text, int length, const EVP_PKEY *key, int *matches) {
    struct tr_crypto_api *api = tr_crypto_api();
    if (matches) *matches = 0;
    if (!api->loaded) return -2;
    BIO *bio = api->bio_new_mem_buf(text, length);
    if (!bio) return 0;
    api->err_clear_error();
    X509 *leaf = api->pem_read_bio_x509_aux(bio, NULL, tokenrelay_no_passphrase, NULL);
    if (!leaf) { api->bio_free(bio); api->err_clear_error(); return 0; }
    if (key && matches) *matches = api->x509_check_private_key(leaf, key) == 1;
    api->x509_free(leaf);
    api->err_clear_error();
    int count = 1;
    X509 *next;
    while ((next = api->pem_read_bio_x509(bio, NULL, tokenrelay_no_passphrase, NULL)) != NULL) {
        api->x509_free(next);
        count += 1;
    }
    unsigned long error = api->err_peek_last_error();
    if (ERR_GET_LIB(error) != ERR_LIB_PEM || ERR_GET_REASON(error) != PEM_R_NO_START_LINE) count = -1;
    api->err_clear_error();
    api->bio_free(bio);
    return count;
}

/* EVP_PKEY_PUBLIC_KEY is a compound macro Swift cannot import. */
static inline int tokenrelay_evp_pkey_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }

/* OSSL_PARAM_BLD keeps the key (and string value) pointers until OSSL_PARAM_BLD_to_param, so the
   names must outlive the Swift call that pushes them: these return static strings. */
static inline const char *tokenrelay_param_rsa_n(void) { return OSSL_PKEY_PARAM_RSA_N; }
static inline const char *tokenrelay_param_rsa_e(void) { return OSSL_PKEY_PARAM_RSA_E; }
static inline const char *tokenrelay_param_group(void) { return OSSL_PKEY_PARAM_GROUP_NAME; }
static inline const char *tokenrelay_param_pub(void) { return OSSL_PKEY_PARAM_PUB_KEY; }
static inline const char *tokenrelay_group_p256(void) { return "prime256v1"; }
static inline const char *tokenrelay_key_type_ec(void) { return "EC"; }
static inline const char *tokenrelay_key_type_rsa(void) { return "RSA"; }

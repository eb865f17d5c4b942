#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <openssl/core_names.h>
#include <openssl/rsa.h>
#include <openssl/bn.h>
#include <openssl/hmac.h>

/* EVP_PKEY_PUBLIC_KEY is a compound macro Swift cannot import. */
static inline int tokenrelay_evp_pkey_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }

/* OSSL_PARAM_BLD keeps the key (and string value) pointers until OSSL_PARAM_BLD_to_param, so the
   names must outlive the Swift call that pushes them: these return static strings. */
static inline const char *tokenrelay_param_rsa_n(void) { return OSSL_PKEY_PARAM_RSA_N; }
static inline const char *tokenrelay_param_rsa_e(void) { return OSSL_PKEY_PARAM_RSA_E; }
static inline const char *tokenrelay_param_group(void) { return OSSL_PKEY_PARAM_GROUP_NAME; }
static inline const char *tokenrelay_param_pub(void) { return OSSL_PKEY_PARAM_PUB_KEY; }
static inline const char *tokenrelay_group_p256(void) { return "prime256v1"; }

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

/* EVP_PKEY_PUBLIC_KEY is a compound macro Swift cannot import. */
static inline int tokenrelay_evp_pkey_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }

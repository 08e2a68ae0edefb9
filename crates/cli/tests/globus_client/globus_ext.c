/*
 * The Globus client library (Debian's libglobus-ftp-client) sending the
 * command extensions no Debian program sends: SITE UTIME, SITE CHGRP and
 * MLSR, logged in as ":globus-mapping:" (the library's default user).
 * Built by crates/cli/tests/peers_globus_client.rs at test time and run
 * against `ferry serve` and globus-gridftp-server alike.
 *
 *   globus_ext [-m] [-e N] utime URL YYYYMMDDHHMMSS
 *   globus_ext [-m] [-e N] chgrp URL GROUP
 *   globus_ext [-m] [-e N] mlsr  URL        (the listing on stdout)
 *
 *   -m    log in as ":globus-mapping:" with an empty password
 *   -e N  extended block mode (MODE E) with N parallel streams
 *
 * Exit status 0 when the operation succeeded; otherwise 1 with the
 * library's error (which carries the server's reply) on stderr.
 */
#include <globus_ftp_client.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static globus_mutex_t lock;
static globus_cond_t cond;
static int done = 0;
static int failed = 0;
static char *error_text = NULL;

static unsigned char *listing = NULL;
static size_t listing_len = 0;
static size_t listing_cap = 0;
static globus_byte_t chunk[65536];

static void complete_cb(void *arg, globus_ftp_client_handle_t *handle, globus_object_t *err)
{
    (void) arg;
    (void) handle;
    globus_mutex_lock(&lock);
    if (err != NULL) {
        failed = 1;
        error_text = globus_error_print_chain(err);
    }
    done = 1;
    globus_cond_signal(&cond);
    globus_mutex_unlock(&lock);
}

static void data_cb(void *arg, globus_ftp_client_handle_t *handle, globus_object_t *err,
                    globus_byte_t *buffer, globus_size_t length, globus_off_t offset, globus_bool_t eof)
{
    (void) arg;
    if (err == NULL && length > 0) {
        size_t end = (size_t) offset + length;
        if (end > listing_cap) {
            listing_cap = end * 2;
            listing = realloc(listing, listing_cap);
            if (listing == NULL) {
                abort();
            }
        }
        memcpy(listing + offset, buffer, length);
        if (end > listing_len) {
            listing_len = end;
        }
    }
    if (err == NULL && !eof) {
        globus_ftp_client_register_read(handle, chunk, sizeof(chunk), data_cb, NULL);
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: globus_ext [-m] [-e N] utime URL YYYYMMDDHHMMSS | chgrp URL GROUP | mlsr URL\n");
    return 2;
}

int main(int argc, char **argv)
{
    int mapping = 0;
    int streams = 0;
    int i = 1;
    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "-m") == 0) {
            mapping = 1;
            i += 1;
        } else if (strcmp(argv[i], "-e") == 0 && i + 1 < argc) {
            streams = atoi(argv[i + 1]);
            i += 2;
        } else {
            return usage();
        }
    }
    if (argc - i < 2) {
        return usage();
    }
    const char *op = argv[i];
    const char *url = argv[i + 1];
    const char *arg = argc - i > 2 ? argv[i + 2] : NULL;

    globus_module_activate(GLOBUS_FTP_CLIENT_MODULE);
    globus_mutex_init(&lock, NULL);
    globus_cond_init(&cond, NULL);

    globus_ftp_client_handle_t handle;
    globus_ftp_client_operationattr_t attr;
    globus_ftp_client_handle_init(&handle, NULL);
    globus_ftp_client_operationattr_init(&attr);
    if (mapping) {
        globus_ftp_client_operationattr_set_authorization(&attr, GSS_C_NO_CREDENTIAL, ":globus-mapping:", "",
                                                          NULL, NULL);
    }
    if (streams > 0) {
        globus_ftp_control_parallelism_t parallelism;
        parallelism.mode = GLOBUS_FTP_CONTROL_PARALLELISM_FIXED;
        parallelism.fixed.size = streams;
        globus_ftp_client_operationattr_set_mode(&attr, GLOBUS_FTP_CONTROL_MODE_EXTENDED_BLOCK);
        globus_ftp_client_operationattr_set_parallelism(&attr, &parallelism);
        /* Listings too, as globus-url-copy -fast does. */
        globus_ftp_client_operationattr_set_list_uses_data_mode(&attr, GLOBUS_TRUE);
    }

    globus_result_t result;
    if (strcmp(op, "utime") == 0 && arg != NULL) {
        struct tm t;
        memset(&t, 0, sizeof(t));
        if (strlen(arg) != 14 || sscanf(arg, "%4d%2d%2d%2d%2d%2d", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour,
                                        &t.tm_min, &t.tm_sec) != 6) {
            return usage();
        }
        t.tm_year -= 1900;
        t.tm_mon -= 1;
        result = globus_ftp_client_utime(&handle, url, &t, &attr, complete_cb, NULL);
    } else if (strcmp(op, "chgrp") == 0 && arg != NULL) {
        result = globus_ftp_client_chgrp(&handle, url, arg, &attr, complete_cb, NULL);
    } else if (strcmp(op, "mlsr") == 0) {
        result = globus_ftp_client_recursive_list(&handle, url, &attr, complete_cb, NULL);
        if (result == GLOBUS_SUCCESS) {
            globus_ftp_client_register_read(&handle, chunk, sizeof(chunk), data_cb, NULL);
        }
    } else {
        return usage();
    }
    if (result != GLOBUS_SUCCESS) {
        globus_mutex_lock(&lock);
        failed = 1;
        error_text = globus_object_printable_to_string(globus_error_get(result));
        done = 1;
        globus_mutex_unlock(&lock);
    }

    globus_mutex_lock(&lock);
    while (!done) {
        globus_cond_wait(&cond, &lock);
    }
    globus_mutex_unlock(&lock);

    if (listing_len > 0) {
        fwrite(listing, 1, listing_len, stdout);
    }
    if (failed) {
        fprintf(stderr, "globus_ext %s %s: %s\n", op, url, error_text ? error_text : "failed");
    }
    globus_ftp_client_operationattr_destroy(&attr);
    globus_ftp_client_handle_destroy(&handle);
    globus_module_deactivate_all();
    return failed ? 1 : 0;
}

/* Ferrite from C on the host: classify the digits demo's held-out images.
 *
 *   host MODEL.frt IMAGES.f32 LABELS.u8
 *
 * IMAGES.f32 holds N images of the model's input size as little-endian float32, LABELS.u8 their
 * N labels. Prints the accuracy, as the Rust demo does. Built and run by c/tests/c_example.rs
 * (gcc, the host static library libferrite_c.a). */
#include "ferrite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file at `path`, in a buffer aligned to FERRITE_ALIGNMENT; NULL on failure. */
static uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    size_t rounded = ((size_t)size + FERRITE_ALIGNMENT - 1) / FERRITE_ALIGNMENT * FERRITE_ALIGNMENT;
    uint8_t *buf = aligned_alloc(FERRITE_ALIGNMENT, rounded ? rounded : FERRITE_ALIGNMENT);
    if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) { free(buf); buf = NULL; }
    fclose(f);
    *len = (size_t)size;
    return buf;
}

static int check(ferrite_status status, const char *what) {
    if (status != FERRITE_OK) {
        fprintf(stderr, "error: %s: %s\n", what, ferrite_status_message(status));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: host MODEL.frt IMAGES.f32 LABELS.u8\n"); return 2; }
    size_t model_len, images_len, labels_len;
    uint8_t *bytes = read_file(argv[1], &model_len);
    float *images = (float *)read_file(argv[2], &images_len);
    uint8_t *labels = read_file(argv[3], &labels_len);
    if (!bytes || !images || !labels) { fprintf(stderr, "error: cannot read the files\n"); return 2; }

    ferrite_model model;
    if (check(ferrite_model_load(&model, bytes, model_len), "load")) return 1;
    ferrite_tensor_info in, out;
    if (check(ferrite_model_input_info(&model, 0, &in), "input") ||
        check(ferrite_model_output_info(&model, 0, &out), "output")) return 1;
    size_t arena_len = ferrite_model_arena_bytes(&model);
    uint8_t *arena = aligned_alloc(ferrite_arena_alignment(), (arena_len + 15) / 16 * 16);
    ferrite_session session;
    if (check(ferrite_session_new(&session, &model, arena, arena_len), "session")) return 1;
    printf("model: %zu bytes, arena %zu bytes, input %.*s [%zu values], output %.*s [%zu values]\n",
           model_len, arena_len, (int)in.name_len, (const char *)in.name, in.bytes / 4,
           (int)out.name_len, (const char *)out.name, out.bytes / 4);

    size_t n = labels_len, correct = 0, classes = out.bytes / sizeof(float);
    if (images_len != n * in.bytes || out.dtype != FERRITE_FLOAT32) {
        fprintf(stderr, "error: %zu images of %zu bytes do not match %zu labels\n",
                images_len / in.bytes, in.bytes, n);
        return 2;
    }
    for (size_t i = 0; i < n; i++) {
        const uint8_t *image = (const uint8_t *)images + i * in.bytes;
        if (check(ferrite_session_set_input(&session, 0, image, in.bytes), "input") ||
            check(ferrite_session_run(&session), "run")) return 1;
        const uint8_t *scores_bytes;
        size_t len;
        if (check(ferrite_session_output(&session, 0, &scores_bytes, &len), "output")) return 1;
        float scores[64];
        memcpy(scores, scores_bytes, classes * sizeof(float));
        size_t best = 0;
        for (size_t c = 1; c < classes; c++) if (scores[c] > scores[best]) best = c;
        correct += best == labels[i];
    }
    printf("accuracy %.4f (%zu of %zu)\n", (double)correct / (double)n, correct, n);
    free(arena); free(bytes); free(images); free(labels);
    return 0;
}

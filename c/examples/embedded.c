/* Ferrite from C with the model compiled in: `ferrite pack digits.onnx -o digits.frt --emit c`
 * writes digits.h and digits.c (the model as an aligned const array, the arena's size and each
 * input's and output's shape as #defines); this program links them with libferrite_c.a and
 * classifies the images in IMAGES.f32 against LABELS.u8, as a firmware would (a static arena,
 * no heap). Built and run by c/tests/c_example.rs.
 *
 *   embedded IMAGES.f32 LABELS.u8 */
#include "digits.h"
#include "ferrite.h"

#include <stdio.h>
#include <string.h>

static _Alignas(16) uint8_t arena[DIGITS_ARENA_BYTES];
static uint8_t images[4096 * DIGITS_INPUT0_BYTES];
static uint8_t labels[4096];

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: embedded IMAGES.f32 LABELS.u8\n"); return 2; }
    FILE *fi = fopen(argv[1], "rb"), *fl = fopen(argv[2], "rb");
    if (!fi || !fl) { fprintf(stderr, "error: cannot open the files\n"); return 2; }
    size_t n_images = fread(images, DIGITS_INPUT0_BYTES, sizeof labels, fi);
    size_t n = fread(labels, 1, sizeof labels, fl);
    fclose(fi);
    fclose(fl);
    if (n != n_images) { fprintf(stderr, "error: %zu images, %zu labels\n", n_images, n); return 2; }

    ferrite_model model;
    ferrite_session session;
    ferrite_status status = ferrite_model_load(&model, digits_model, DIGITS_MODEL_BYTES);
    if (status == FERRITE_OK) status = ferrite_session_new(&session, &model, arena, sizeof arena);
    if (status != FERRITE_OK) { fprintf(stderr, "error: %s\n", ferrite_status_message(status)); return 1; }
    size_t correct = 0;
    for (size_t i = 0; i < n; i++) {
        float scores[DIGITS_OUTPUT0_BYTES / sizeof(float)];
        status = ferrite_session_set_input(&session, 0, images + i * DIGITS_INPUT0_BYTES, DIGITS_INPUT0_BYTES);
        if (status == FERRITE_OK) status = ferrite_session_run(&session);
        if (status == FERRITE_OK)
            status = ferrite_session_read_output(&session, 0, (uint8_t *)scores, sizeof scores);
        if (status != FERRITE_OK) { fprintf(stderr, "error: %s\n", ferrite_status_message(status)); return 1; }
        size_t best = 0;
        for (size_t c = 1; c < sizeof scores / sizeof scores[0]; c++) if (scores[c] > scores[best]) best = c;
        correct += best == labels[i];
    }
    printf("embedded model: %d bytes, arena %d bytes; accuracy %.4f (%zu of %zu)\n",
           DIGITS_MODEL_BYTES, DIGITS_ARENA_BYTES, (double)correct / (double)n, correct, n);
    return 0;
}

// Images in the composer and the transcript. A pasted (clipboard `image/*`) or dropped
// image file is read as base64, shown as a removable thumbnail chip above the input, and
// sent as an ACP `image` block beside the text; a refusal (a model that takes no images:
// -32602 naming `prompt`) is shown next to the composer, the text and the chips kept. A
// stored user entry's `images` are fetched with `_session/image` and drawn as
// thumbnails, only for the four types the sidecar keeps (never SVG).
"use strict";

(window.AcpUi = window.AcpUi || {}).images = (ui) => {
  const { byId, el, state } = ui;
  const TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
  const MAX_BYTES = 5 * 1024 * 1024; // the sidecar's limit; larger is refused here at once
  const attached = new Map(); // sessionId -> [{key, mimeType, data, name}]
  let nextKey = 1;

  const dataUrl = (mimeType, data) => `data:${mimeType};base64,${data}`;

  function readBase64(file) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ""));
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });
  }

  // Files from a paste or a drop: the images among them attached, the rest said so.
  async function attachFiles(files) {
    const sessionId = state.selected;
    if (!sessionId) return;
    for (const file of files) {
      if (!TYPES.includes(file.type)) {
        showComposerError(`“${file.name || "This file"}” is not a PNG, JPEG, GIF or WebP image, so it was not attached.`);
        continue;
      }
      if (file.size > MAX_BYTES) {
        showComposerError(`“${file.name || "This image"}” is larger than 5 MiB, so it was not attached.`);
        continue;
      }
      let data;
      try {
        data = await readBase64(file);
      } catch (err) {
        showComposerError(`The image could not be read: ${String((err && err.message) || err)}`);
        continue;
      }
      if (!attached.has(sessionId)) attached.set(sessionId, []);
      attached.get(sessionId).push({ key: nextKey++, mimeType: file.type, data, name: file.name || "image" });
    }
    renderChips();
  }

  function renderChips() {
    const box = byId("attachments");
    const list = attached.get(state.selected) || [];
    box.replaceChildren(
      ...list.map((img) =>
        el(
          "div",
          { class: "attach-chip", "data-testid": "attach-chip", title: img.name },
          el("img", { class: "attach-thumb", src: dataUrl(img.mimeType, img.data), alt: img.name }),
          el("button", {
            type: "button",
            class: "ghost small attach-remove",
            "data-testid": "attach-remove",
            "aria-label": `Remove ${img.name}`,
            text: "×",
            onclick: () => removeImage(img.key),
          }),
        ),
      ),
    );
    box.hidden = !list.length;
  }

  function removeImage(key) {
    const list = (attached.get(state.selected) || []).filter((img) => img.key !== key);
    attached.set(state.selected, list);
    renderChips();
    byId("prompt-input").focus();
  }

  // The `image` blocks to send with the selected session's next message.
  function imageBlocks(sessionId) {
    return (attached.get(sessionId) || []).map((img) => ({ type: "image", mimeType: img.mimeType, data: img.data }));
  }

  // Sent: the chips go (a refused message keeps them).
  function clearImages(sessionId) {
    attached.delete(sessionId);
    if (sessionId === state.selected) renderChips();
  }

  function showComposerError(message) {
    const box = byId("composer-error");
    box.textContent = message;
    box.hidden = false;
  }

  function clearComposerError() {
    const box = byId("composer-error");
    box.hidden = true;
    box.textContent = "";
  }

  // ---- the transcript's stored images --------------------------------------------------

  // Thumbnails of a user entry's `images`, filled in as `_session/image` answers.
  function storedImages(sessionId, images) {
    if (!Array.isArray(images) || !images.length) return null;
    const box = el("div", { class: "msg-images", "data-testid": "msg-images" });
    for (const ref of images) {
      if (!ref || typeof ref.id !== "string" || !TYPES.includes(ref.mimeType)) continue;
      const slot = el("span", { class: "msg-image", "data-testid": "msg-image", title: `${ref.width || "?"}×${ref.height || "?"}` });
      box.append(slot);
      ui.quietCall("image", sessionId, ref.id).then((got) => {
        if (!got || !TYPES.includes(got.mimeType) || typeof got.data !== "string") return;
        slot.append(el("img", { class: "msg-thumb", src: dataUrl(got.mimeType, got.data), alt: "image" }));
      });
    }
    return box.childElementCount ? box : null;
  }

  function wire() {
    const input = byId("prompt-input");
    input.addEventListener("paste", (e) => {
      const items = [...((e.clipboardData && e.clipboardData.items) || [])];
      const files = items.filter((i) => i.kind === "file" && i.type.startsWith("image/")).map((i) => i.getAsFile()).filter(Boolean);
      if (!files.length) return; // text pastes as text
      e.preventDefault();
      attachFiles(files);
    });
    const form = input.closest("form");
    form.addEventListener("dragover", (e) => {
      if (e.dataTransfer && [...e.dataTransfer.types].includes("Files")) e.preventDefault();
    });
    form.addEventListener("drop", (e) => {
      const files = [...((e.dataTransfer && e.dataTransfer.files) || [])];
      if (!files.length) return;
      e.preventDefault();
      attachFiles(files);
    });
  }

  return { imageBlocks, clearImages, renderChips, storedImages, showComposerError, clearComposerError, wireImages: wire };
};

// Uploading a file to POST /v1/files with progress; the answer's attachment line goes into
// the message. XMLHttpRequest, because fetch has no upload progress.

import { LOST, auth } from "./api.js";

export function upload(file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/v1/files");
    xhr.withCredentials = true;
    const token = auth.token();
    if (token) xhr.setRequestHeader("Authorization", "Bearer " + token);
    xhr.responseType = "json";
    xhr.upload.addEventListener("progress", (e) => {
      if (e.lengthComputable && onProgress) onProgress(e.loaded / e.total);
    });
    xhr.addEventListener("load", () => {
      const body = xhr.response;
      if (xhr.status === 201 && body) return resolve(body);
      const message = body && body.error && body.error.message;
      reject(new Error(message || (xhr.status === 413 ? "That file is too large for this server." : `Upload failed (${xhr.status})`)));
    });
    xhr.addEventListener("error", () => reject(new Error(LOST)));
    xhr.addEventListener("abort", () => reject(new Error("Upload cancelled")));
    const form = new FormData();
    form.append("file", file, file.name || "upload");
    xhr.send(form);
  });
}
